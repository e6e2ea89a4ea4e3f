//go:build arm64 && !purego

package vec

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// normAsm reports whether the LayerNorm row primitives (norm.go) run
// their NEON kernels (norm_arm64.s): on every arm64 CPU Go runs on
// (Advanced SIMD is part of ARMv8-A; x/sys/cpu says so). Tests clear it to
// run the fallbacks through the public API.
var normAsm = cpu.ARM64.HasASIMD

// asmName names this build's kernels.
const asmName = "neon"

// momentsNEON adds x[j] and x[j]² to s[j%16] and q[j%16] for j < n, n a
// multiple of 16, in order of j.
//
//go:noescape
func momentsNEON(x *float32, n int, s, q *float64)

// lnGradSumsNEON adds x[j], x[j]², g and g·x[j] (g = dy[j]·w[j]) to lane
// j%8 of a, b, c and d for j < n, n a multiple of 8, in order of j.
//
//go:noescape
func lnGradSumsNEON(x, w, dy *float32, n int, a, b, c, d *float64)

// lnRowNEON is lnRowGo over n elements, n a multiple of 8.
//
//go:noescape
func lnRowNEON(y, x, w, b *float32, n int, mean, rstd float64)

// lnGradXRowNEON is lnGradXRowGo over n elements, n a multiple of 8.
//
//go:noescape
func lnGradXRowNEON(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64)

// lnGradWAccumNEON is lnGradWAccumGo over n elements, n a multiple of 8.
//
//go:noescape
func lnGradWAccumNEON(acc *float64, x, dy *float32, n int, mean, rstd float64)

// momentsAsm is momentsGo (n a multiple of 4) with the whole chunks of 16
// on the NEON kernel.
func momentsAsm(x *float32, n int) (s, ss float64) {
	xs := unsafe.Slice(x, n)
	whole := n &^ 15
	var a, q [16]float64
	if whole > 0 {
		momentsNEON(x, whole, &a[0], &q[0])
	}
	momentLanes(xs, whole, n, 4, (*[4]float64)(a[0:4]), (*[4]float64)(q[0:4])) // groups left over
	return sumLanesGo(a[:]), sumLanesGo(q[:])
}

// lnGradSumsAsm is lnGradSumsGo (n a multiple of 4) with the whole chunks
// of 8 on the NEON kernel.
func lnGradSumsAsm(x, w, dy *float32, n int) (sx, sxx, sg, sgx float64) {
	whole := n &^ 7
	var a, b, c, d [8]float64
	if whole > 0 {
		lnGradSumsNEON(x, w, dy, whole, &a[0], &b[0], &c[0], &d[0])
	}
	if whole < n { // a group of 4 left over, to lanes 0-3
		gradLanes(unsafe.Slice(x, n), unsafe.Slice(w, n), unsafe.Slice(dy, n), whole, n, 8,
			(*[4]float64)(a[0:4]), (*[4]float64)(b[0:4]), (*[4]float64)(c[0:4]), (*[4]float64)(d[0:4]))
	}
	return sumLanesGo(a[:]), sumLanesGo(b[:]), sumLanesGo(c[:]), sumLanesGo(d[:])
}

// The elementwise primitives' kernels are the NEON ones (the wrappers
// inline).

func lnRowAsm(y, x, w, b *float32, n int, mean, rstd float64) { lnRowNEON(y, x, w, b, n, mean, rstd) }

func lnGradXRowAsm(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64) {
	lnGradXRowNEON(dx, x, w, dy, n, mean, rstd, sg, sgx)
}

func lnGradWAccumAsm(acc *float64, x, dy *float32, n int, mean, rstd float64) {
	lnGradWAccumNEON(acc, x, dy, n, mean, rstd)
}
