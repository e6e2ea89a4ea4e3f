package vec

import (
	"strconv"
	"testing"

	"gptlab/internal/testutil"
)

// This file times the LayerNorm row primitives, kernel against fallback;
// the passes built from them are timed against the scalar loops they
// replace in models (BenchmarkLayerNormKernels).

// lnBenchData returns x, dy (rows, C) and w, b (C) of seeded noise.
func lnBenchData(rows, C int) (x, dy, w, b []float32) {
	r := normRand(7)
	return normData(r, "noise", rows*C), normData(r, "noise", rows*C), normData(r, "noise", C), normData(r, "noise", C)
}

// BenchmarkNormRow runs each primitive on one row, kernel ("asm") and
// fallback ("go"): of one vector (8, where the call overhead shows), of
// the model's C = 128, of an odd 513 and of a long 4096 (throughput).
func BenchmarkNormRow(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, n := range []int{8, 128, 513, 4096} {
		x, dy, w, bias := lnBenchData(1, n)
		y, acc := make([]float32, n), make([]float64, n)
		ops := []struct {
			name string
			f    func()
		}{
			{"Moments", func() { Moments(x) }},
			{"LNGradSums", func() { LNGradSums(x, w, dy) }},
			{"LNRow", func() { LNRow(y, x, w, bias, 0.1, 1.2) }},
			{"LNGradXRow", func() { LNGradXRow(y, x, w, dy, 0.1, 1.2, 0.01, 0.02) }},
			{"LNGradWAccum", func() { LNGradWAccum(acc, x, dy, 0.1, 1.2) }},
		}
		for _, op := range ops {
			for _, path := range []string{"asm", "go"} {
				b.Run(op.name+"/"+path+"/n="+strconv.Itoa(n), func(b *testing.B) {
					if path == "go" {
						old := normAsm
						normAsm = false
						defer func() { normAsm = old }()
					}
					b.ReportAllocs()
					b.SetBytes(int64(4 * n))
					for b.Loop() {
						op.f()
					}
				})
			}
		}
	}
}
