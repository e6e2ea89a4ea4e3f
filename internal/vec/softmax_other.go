//go:build !(amd64 || arm64) || purego

package vec

// softmaxAsm is false: this build has no assembly kernels, and the
// primitives never call the stand-ins below.
var softmaxAsm = false

func expSumKernel(y, x []float32, scale, shift float32, acc *[8]float64) { panic(noKernels) }

func maxAsm(x *float32, n int, m *float32) { panic(noKernels) }

func scaleAsm(y, x *float32, n int, a float32) { panic(noKernels) }

func dotAsm(a, b []float32) float64 { panic(noKernels) }

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
