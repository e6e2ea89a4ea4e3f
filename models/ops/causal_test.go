package ops

import (
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"gptlab/planner/arena"
)

// TestCausalKernelsMatchReference: the blocked float32 kernels of the three
// causal products equal the float64 definition (for any l: its entries
// above the diagonal are never read), over T spanning partial blocks.
func TestCausalKernelsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, T := range []int{1, 7, causalRows, causalRows + 1, 2*causalRows + 5} {
		for _, kind := range []causalKind{causalScores, causalApply, causalApplyT} {
			op := causalOp{kind: kind}
			const N, d = 3, 6
			xs := tensor.Shape{N, T, d}
			if kind != causalScores {
				xs = tensor.Shape{N, T, T}
			}
			ys := tensor.Shape{N, T, d}
			out, _ := op.check([]tensor.Shape{xs, ys})
			x32, y32 := make([]float32, xs.TotalSize()), make([]float32, ys.TotalSize())
			x64, y64 := make([]float64, len(x32)), make([]float64, len(y32))
			for i := range x32 {
				x32[i] = float32(r.NormFloat64())
				x64[i] = float64(x32[i])
			}
			for i := range y32 {
				y32[i] = float32(r.NormFloat64())
				y64[i] = float64(y32[i])
			}
			want := make([]float64, out.TotalSize())
			op.reference(want, x64, y64, out, xs)
			got := make([]float32, out.TotalSize())
			for i := range got {
				got[i] = float32(math.NaN()) // every element must be written
			}
			run, err := op.bind(arena.Buf{Dtype: arena.F32, F32: got, Shape: out},
				[]arena.Buf{{Dtype: arena.F32, F32: x32, Shape: xs}, {Dtype: arena.F32, F32: y32, Shape: ys}})
			if err != nil {
				t.Fatal(err)
			}
			run()
			for i, w := range want {
				if d := math.Abs(float64(got[i]) - w); !(d <= 1e-4*(1+math.Abs(w))) {
					t.Fatalf("%v T=%d: element %d = %v, want %v", op, T, i, got[i], w)
				}
			}
		}
	}
}
