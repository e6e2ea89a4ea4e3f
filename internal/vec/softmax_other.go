//go:build !(amd64 || arm64) || purego

package vec

// softmaxAsm is false: this build has no assembly kernels, and the
// primitives never call the stand-ins below.
var softmaxAsm = false

func expSumKernel(y, x []float32, scale, shift float32, acc *[8]float64) { panic(noKernels) }

func maxAsm(x *float32, n int, m *float32) { panic(noKernels) }

func scaleAsm(y, x *float32, n int, a float32) { panic(noKernels) }

func dotAsm(a, b []float32) float64 { panic(noKernels) }
