//go:build arm64 && !purego

package vec

import "golang.org/x/sys/cpu"

// softmaxAsm reports whether the softmax row primitives (softmax.go) run
// their NEON kernels (softmax_arm64.s): on every arm64 CPU Go runs on
// (Advanced SIMD is part of ARMv8-A; x/sys/cpu says so). Tests clear it to
// run the fallbacks through the public API.
var softmaxAsm = cpu.ARM64.HasASIMD

// expSumNEON sets y[j] = exp(fma(x[j], scale, -shift)) (expArg) and adds
// float64(y[j]) to acc[j%8], for j < n, n a multiple of 8.
//
//go:noescape
func expSumNEON(y, x *float32, n int, scale, shift float32, acc *float64)

// maxNEON is maxGo over x[:n], n a multiple of 8.
//
//go:noescape
func maxNEON(x *float32, n int, m *float32)

// scaleNEON sets y[j] = x[j]·a for j < n, n a multiple of 8.
//
//go:noescape
func scaleNEON(y, x *float32, n int, a float32)

// dotNEON adds float64(a[j])·float64(b[j]) (exact) to acc[j%32] for
// j < n, n a multiple of 32, in order of j.
//
//go:noescape
func dotNEON(a, b *float32, n int, acc *float64)

// expSumKernel runs expSumNEON over the whole vectors of 8 and expSumGo,
// the same steps, over the rest: lane j%8 either way.
func expSumKernel(y, x []float32, scale, shift float32, acc *[8]float64) {
	n := len(x) &^ 7
	if n > 0 {
		expSumNEON(&y[0], &x[0], n, scale, shift, &acc[0])
	}
	expSumGo(y[n:], x[n:], scale, shift, acc)
}

// maxAsm is maxNEON.
func maxAsm(x *float32, n int, m *float32) { maxNEON(x, n, m) }

// scaleAsm is scaleNEON.
func scaleAsm(y, x *float32, n int, a float32) { scaleNEON(y, x, n, a) }

// dotAsm is Dot with the blocks of 32 on the NEON kernel.
func dotAsm(a, b []float32) float64 {
	var acc [32]float64
	blocks := len(a) &^ 31
	if blocks > 0 {
		dotNEON(&a[0], &b[0], blocks, &acc[0])
	}
	dotRest(a, b, blocks, &acc)
	return sum32(&acc)
}

// softmaxZ is amd64's AVX-512 switch (softmax_amd64.go): never on here.
var softmaxZ = false

// maxRow and scaleRow are the whole-row kernels of amd64: none
// here.
func maxRow(x []float32) (float32, bool) { return 0, false }

func scaleRow(y, x []float32, a float32) bool { return false }

// prefixRow is amd64's SoftmaxPrefix kernel: none here.
func prefixRow(y, x []float32, n int, scale float32) bool { return false }

// softmaxGradKernels: SoftmaxGrad runs its Go loops here.
const softmaxGradKernels = false

func dot4Asm(y, dy []float32, n int, lanes *[4]float64) { panic("vec: no SoftmaxGrad kernel") }

func softmaxGradAsm(ds, y, dy []float32, n int, scale, dot float64) {
	panic("vec: no SoftmaxGrad kernel")
}
