//go:build !(amd64 || arm64) || purego

package vec

// normAsm is false: this build has no assembly kernels, and the
// primitives never call the stand-ins below.
var normAsm = false

// asmName names this build's kernels: none.
const asmName = "go"

const noKernels = "vec: no assembly kernels in this build"

func momentsAsm(x *float32, n int) (s, ss float64) { panic(noKernels) }

func lnGradSumsAsm(x, w, dy *float32, n int) (sx, sxx, sg, sgx float64) { panic(noKernels) }

func lnRowAsm(y, x, w, b *float32, n int, mean, rstd float64) { panic(noKernels) }

func lnGradXRowAsm(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64) { panic(noKernels) }

func lnGradWAccumAsm(acc *float64, x, dy *float32, n int, mean, rstd float64) { panic(noKernels) }
