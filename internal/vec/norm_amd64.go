//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/norm . -out ../../norm_amd64.s -stubs ../../norm_amd64_stubs.go -pkg vec

// normAsm reports whether the LayerNorm row primitives (norm.go) run
// their AVX2 kernels (norm_amd64.s). x/sys/cpu reports AVX2 only when the
// OS saves the YMM registers. Tests clear it to run the fallbacks through
// the public API.
var normAsm = cpu.X86.HasAVX2

// asmName names this build's kernels.
const asmName = "avx2"

// The primitives' kernels are the AVX2 ones (the wrappers inline).

func momentsAsm(x *float32, n int) (s, ss float64) { return momentsAVX2(x, n) }

func lnGradSumsAsm(x, w, dy *float32, n int) (sx, sxx, sg, sgx float64) {
	return lnGradSumsAVX2(x, w, dy, n)
}

func lnRowAsm(y, x, w, b *float32, n int, mean, rstd float64) { lnRowAVX2(y, x, w, b, n, mean, rstd) }

func lnGradXRowAsm(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64) {
	lnGradXRowAVX2(dx, x, w, dy, n, mean, rstd, sg, sgx)
}

func lnGradWAccumAsm(acc *float64, x, dy *float32, n int, mean, rstd float64) {
	lnGradWAccumAVX2(acc, x, dy, n, mean, rstd)
}
