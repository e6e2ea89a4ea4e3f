//go:build !amd64 || purego

package vec

// normAVX2 is false: this build has no assembly kernels, and the
// primitives never call the stand-ins below.
var normAVX2 = false

const noKernels = "vec: no AVX2 kernels in this build"

func momentsAVX2(x *float32, n int) (s, ss float64) { panic(noKernels) }

func lnGradSumsAVX2(x, w, dy *float32, n int) (sx, sxx, sg, sgx float64) { panic(noKernels) }

func lnRowAVX2(y, x, w, b *float32, n int, mean, rstd float64) { panic(noKernels) }

func lnGradXRowAVX2(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64) { panic(noKernels) }

func lnGradWAccumAVX2(acc *float64, x, dy *float32, n int, mean, rstd float64) { panic(noKernels) }
