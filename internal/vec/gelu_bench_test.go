package vec

import (
	"math"
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
)

// geluBenchN is the elements of baby's MLP activation: 768 rows of 512.
const geluBenchN = 768 * 512

// BenchmarkGELU times GELU and GELUGrad per element on one goroutine, for
// every implementation, against the float64 math.Erf loop
// (reference-erf). (The scalar float64 table lookups these kernels
// replaced in models took 5-6.6 ns per element here, the kernels 1.4-1.7.)
func BenchmarkGELU(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	rng := rand.New(rand.NewPCG(1, 1))
	x, dy := make([]float32, geluBenchN), make([]float32, geluBenchN)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		dy[i] = float32(rng.NormFloat64())
	}
	y := make([]float32, len(x))
	perElem := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/elem")
	}
	for _, im := range geluImpls() {
		b.Run(im.name+"/forward", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(8 * geluBenchN)
			for b.Loop() {
				im.fwd(y, x)
			}
			perElem(b)
		})
		b.Run(im.name+"/backward", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(12 * geluBenchN)
			for b.Loop() {
				im.grad(y, x, dy)
			}
			perElem(b)
		})
	}
	b.Run("reference-erf", func(b *testing.B) {
		b.ReportAllocs()
		x64, y64 := make([]float64, len(x)), make([]float64, len(x))
		for i, v := range x {
			x64[i] = float64(v)
		}
		for b.Loop() {
			for i, f := range x64 {
				y64[i] = 0.5 * f * (1 + math.Erf(f/math.Sqrt2))
			}
		}
		perElem(b)
	})
}
