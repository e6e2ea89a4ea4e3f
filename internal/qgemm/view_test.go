package qgemm

import (
	"slices"
	"testing"

	"gptlab/precision"
)

// TestCodesAndRows: Codes unpacks the codes packed, DequantizeRow gives
// precision's dequantized row, and a view of whole panels computes
// bitwise what the same rows packed on their own compute, sharing the
// parent's memory; a range not on panel boundaries is refused.
func TestCodesAndRows(t *testing.T) {
	for _, sc := range schemes {
		p := newProblem(t, shape{5, 72, 70}, sc, 21)
		if !slices.Equal(p.w.Codes(), p.q) {
			t.Fatalf("%v: Codes differ from the codes packed", sc)
		}
		deq := make([]float32, p.n*p.k)
		precision.DequantizeInt8(deq, p.q, p.scales, p.n, p.k, sc)
		row := make([]float32, p.k)
		for j := range p.n {
			p.w.DequantizeRow(row, j)
			if i := firstDiff(row, deq[j*p.k:(j+1)*p.k]); i >= 0 {
				t.Fatalf("%v: row %d element %d = %g, want %g", sc, j, i, row[i], deq[j*p.k+i])
			}
		}
		for _, r := range [][2]int{{16, 48}, {32, 72}, {0, 16}} {
			lo, hi := r[0], r[1]
			v, ok := p.w.Rows(lo, hi)
			if !ok {
				t.Fatalf("%v: Rows(%d, %d) refused", sc, lo, hi)
			}
			if &v.Packed()[0] != &p.w.Packed()[lo*p.w.kp] {
				t.Errorf("%v: Rows(%d, %d) does not share the codes", sc, lo, hi)
			}
			q, s := p.q[lo*p.k:hi*p.k], p.scales
			if sc != precision.Int8PerTensor {
				nb := sc.NumScales(p.n, p.k) / p.n
				s = p.scales[lo*nb : hi*nb]
			}
			own, err := NewWeights(hi-lo, p.k, q, s, sc)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Codes(), q) {
				t.Fatalf("%v: Rows(%d, %d) codes differ", sc, lo, hi)
			}
			for _, k := range kernels {
				for _, op := range []func(*kernel, []float32, []float32, int, *Weights){dynamic, weightOnly} {
					got, want := make([]float32, p.m*(hi-lo)), make([]float32, p.m*(hi-lo))
					op(k, got, p.x, p.m, v)
					op(k, want, p.x, p.m, own)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s %v Rows(%d, %d): y[%d] = %g, packed alone %g", k.name, sc, lo, hi, i, got[i], want[i])
					}
				}
			}
		}
		for _, r := range [][2]int{{8, 32}, {16, 40}, {0, 0}, {64, 80}} {
			if _, ok := p.w.Rows(r[0], r[1]); ok {
				t.Errorf("%v: Rows(%d, %d) accepted", sc, r[0], r[1])
			}
		}
	}
}
