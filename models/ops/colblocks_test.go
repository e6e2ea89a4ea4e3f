package ops

import (
	"fmt"
	"testing"

	"gptlab/planner/arena"
	"gptlab/precision"
)

// TestColumnBlocksMatchWholeRows: ColSum and LayerNormGradW, bound (split
// into colBlocks), give bitwise the sums of one pass over whole rows, on
// widths that leave a block, or the row, a tail past its vectors; ColSum
// of bf16 bits (a fused cast's reader) gives the sums of their cast up.
func TestColumnBlocksMatchWholeRows(t *testing.T) {
	for _, s := range []struct{ N, C int }{{768, 128}, {7, 513}, {5, 1000}, {3, 65}, {2, 8}, {70, 200}} {
		t.Run(fmt.Sprintf("%dx%d", s.N, s.C), func(t *testing.T) {
			N, C := s.N, s.C
			x, dy := benchData(N*C), benchData(N*C + 1)[1:]
			buf := func(d []float32, shape ...int) arena.Buf {
				return arena.Buf{Dtype: arena.F32, F32: d, Shape: shape}
			}
			// whole rows: one block of every column
			acc := make([]float64, C)
			wantSum, wantW := make([]float32, C), make([]float32, C)
			colSumRange(wantSum, x, acc, 0, C)
			x16, x16up, wantSum16 := make([]uint16, N*C), make([]float32, N*C), make([]float32, C)
			precision.EncodeBF16(x16, x)
			precision.DecodeBF16(x16up, x16)
			colSumRange(wantSum16, x16up, acc, 0, C)
			stats := make([]float64, 2*N)
			lnRowStats(stats, x, C, 0, N)
			lnBackwardW32(wantW, x, dy, stats, acc, 0, C)
			for _, tc := range []struct {
				name string
				op   binder
				in   []arena.Buf
				want []float32
			}{
				{"ColSum", colSumOp{}, []arena.Buf{buf(x, N, C)}, wantSum},
				{"ColSum of bf16", colSumOp{}, []arena.Buf{{Dtype: arena.BF16, U16: x16, Shape: []int{N, C}}}, wantSum16},
				{"LayerNormGradW", lnGradWOp{}, []arena.Buf{buf(x, N, C), buf(dy, N, C)}, wantW},
			} {
				got := make([]float32, C)
				run, err := tc.op.bind(buf(got, C), tc.in)
				if err != nil {
					t.Fatal(err)
				}
				run()
				if j := bitsEqual(got, tc.want); j >= 0 {
					t.Fatalf("%s: [%d] = %v by blocks, %v by whole rows", tc.name, j, got[j], tc.want[j])
				}
			}
		})
	}
}
