package precision

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
)

// benchSizes are the slice lengths of the conversion benchmarks: in L1, in
// L2, and past the caches.
var benchSizes = []int{4 << 10, 64 << 10, 4 << 20}

// BenchmarkEncode times each narrowing conversion with the scalar code and
// with every kernel this machine runs. Bytes are those of the float32
// input (4 a value).
func BenchmarkEncode(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	l := archKernels()
	for _, f := range []struct {
		name   string
		scalar func(float32) uint16
		ks     []encKernel
	}{{"fp16", ToFP16, l.encFP16}, {"bf16", ToBF16, l.encBF16}} {
		for _, n := range benchSizes {
			src := randomNormals(n)
			dst := make([]uint16, n)
			run := func(name string, k encKernel) {
				b.Run(fmt.Sprintf("%s/n=%d/%s", f.name, n, name), func(b *testing.B) {
					b.SetBytes(int64(4 * n))
					b.ReportAllocs()
					for b.Loop() {
						encode(k, dst, src, false, f.scalar)
					}
				})
			}
			run("go", encKernel{})
			for _, k := range f.ks {
				run(k.name, k)
			}
		}
	}
}

// BenchmarkDecode times each widening conversion; bytes are those of the
// float32 output.
func BenchmarkDecode(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	l := archKernels()
	for _, f := range []struct {
		name   string
		scalar func(uint16) float32
		ks     []decKernel
	}{{"fp16", FromFP16, l.decFP16}, {"bf16", FromBF16, l.decBF16}} {
		for _, n := range benchSizes {
			src := make([]uint16, n)
			EncodeFP16(src, randomNormals(n))
			dst := make([]float32, n)
			run := func(name string, k decKernel) {
				b.Run(fmt.Sprintf("%s/n=%d/%s", f.name, n, name), func(b *testing.B) {
					b.SetBytes(int64(4 * n))
					b.ReportAllocs()
					for b.Loop() {
						decode(k, dst, src, f.scalar)
					}
				})
			}
			run("go", decKernel{})
			for _, k := range f.ks {
				run(k.name, k)
			}
		}
	}
}

// randomNormals returns n values of a unit normal distribution (the
// magnitudes of activations; fixed seed).
func randomNormals(n int) []float32 {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// BenchmarkUnscale times the loss scaler's pass over a gradient (multiply
// by 1/scale and check for Inf/NaN) and the bare check, scalar and with
// each kernel; bytes are the gradient's.
func BenchmarkUnscale(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	n := 1 << 20
	g := randomNormals(n)
	ks := append([]absKernel{{name: "go"}}, archKernels().abs...)
	for _, k := range ks {
		for _, scale := range []bool{true, false} {
			what := "check"
			if scale {
				what = "unscale"
			}
			b.Run(fmt.Sprintf("%s/n=%d/%s", what, n, k.name), func(b *testing.B) {
				withKernels(kernelSet{abs: k}, func() {
					b.SetBytes(int64(4 * n))
					b.ReportAllocs()
					for b.Loop() {
						maxAbsBits(g, 1, scale) // a multiply by 1 keeps g as it is
					}
				})
			})
		}
	}
}
