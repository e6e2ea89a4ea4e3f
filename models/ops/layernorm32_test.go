package ops

import (
	"fmt"
	"math"
	"testing"

	"gptlab/internal/testutil"
)

// lnPasses are the three float32 LayerNorm passes: the vector kernels
// (layernorm32.go) and the scalar reference loops they replace.
func lnPasses(x, dy, w, b, out, dw []float32, acc []float64) []struct {
	name      string
	ref, fast func()
	got       []float32
} {
	return []struct {
		name      string
		ref, fast func()
		got       []float32
	}{
		{"forward", func() { lnForward(out, x, w, b) }, func() { lnForward32(out, x, w, b) }, out},
		{"backwardX", func() { lnBackwardX(out, x, w, dy) }, func() { lnBackwardX32(out, x, w, dy) }, out},
		{"backwardW", func() { lnBackwardW(dw, x, dy, acc) }, func() {
			C := len(dw)
			stats := make([]float64, 2*len(x)/C)
			lnRowStats(stats, x, C, 0, len(x)/C)
			lnBackwardW32(dw, x, dy, stats, acc, 0, C)
		}, dw},
	}
}

// TestLayerNorm32MatchesReference: the vector passes differ from the
// scalar loops only in the order of the float64 row sums, so they agree
// to float32 rounding, on rows with a large common offset too.
func TestLayerNorm32MatchesReference(t *testing.T) {
	for _, shape := range []struct {
		rows, C int
		offset  float32
	}{{1, 1, 0}, {3, 5, 0}, {7, 128, 0}, {2, 513, 0}, {5, 128, 1000}} {
		t.Run(fmt.Sprintf("%dx%d+%g", shape.rows, shape.C, shape.offset), func(t *testing.T) {
			x, dy := benchData(shape.rows*shape.C), benchData(shape.rows*shape.C + 1)[1:]
			for i := range x {
				x[i] += shape.offset
			}
			w, b := benchData(shape.C + 2)[2:], benchData(shape.C + 3)[3:]
			out, dw, acc := make([]float32, len(x)), make([]float32, shape.C), make([]float64, shape.C)
			for _, p := range lnPasses(x, dy, w, b, out, dw, acc) {
				p.ref()
				want := append([]float32(nil), p.got...)
				p.fast()
				for i, v := range want {
					if d := math.Abs(float64(p.got[i] - v)); d > 1e-6+1e-5*math.Abs(float64(v)) {
						t.Fatalf("%s[%d] = %v, reference %v", p.name, i, p.got[i], v)
					}
				}
			}
		})
	}
}

// BenchmarkLayerNormKernels times each pass over baby's (768, 128)
// LayerNorm input on one goroutine: the vector kernels against the scalar
// loops they replace (compare the ratio within one run).
func BenchmarkLayerNormKernels(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const N, C = 768, 128
	x, dy, w, bias := benchData(N*C), benchData(N*C + 1)[1:], benchData(C + 2)[2:], benchData(C + 3)[3:]
	out, dw, acc := make([]float32, N*C), make([]float32, C), make([]float64, C)
	for _, p := range lnPasses(x, dy, w, bias, out, dw, acc) {
		for _, impl := range []struct {
			name string
			f    func()
		}{{"scalar", p.ref}, {"vec", p.fast}} {
			b.Run(p.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					impl.f()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*N), "ns/row")
			})
		}
	}
}
