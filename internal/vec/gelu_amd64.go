//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/gelu . -out ../../gelu_amd64.s -stubs ../../gelu_amd64_stubs.go -pkg vec
//go:generate go run -C asm/gelu . -wide -out ../../gelu512_amd64.s -stubs ../../gelu512_amd64_stubs.go -pkg vec

// geluImpls lists the implementations of GELU this CPU supports, best
// first: the AVX-512F kernels when x/sys/cpu reports AVX-512F (only when
// the OS saves the ZMM registers), the AVX2+FMA kernels when it reports
// both (AVX2 only when the OS saves the YMM registers), then the pure-Go
// loops. The AVX-512 kernels make the AVX2 kernels' operations lane by
// lane, so the two give the same bits (TestGELUImplsAgree).
func geluImpls() []geluImpl {
	ims := []geluImpl{{name: "go", fwd: geluGo, grad: geluGradGo}}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ims = append([]geluImpl{{name: "avx2", fwd: geluAVX2Slice, grad: geluGradAVX2Slice}}, ims...)
	}
	if cpu.X86.HasAVX512F {
		ims = append([]geluImpl{{name: "avx512", fwd: geluAVX512Slice, grad: geluGradAVX512Slice}}, ims...)
	}
	return ims
}

// geluAVX2Slice runs geluAVX2 over the whole vectors of x, then over the
// last partial vector padded with zeros in a stack copy, so that every
// element goes through the same kernel whatever the length.
func geluAVX2Slice(y, x []float32) { geluSlice(geluAVX2, 8, y, x) }

// geluGradAVX2Slice is geluAVX2Slice for geluGradAVX2.
func geluGradAVX2Slice(dx, x, dy []float32) { geluGradSlice(geluGradAVX2, 8, dx, x, dy) }

// geluAVX512Slice is geluAVX2Slice for geluAVX512 (vectors of 16).
func geluAVX512Slice(y, x []float32) { geluSlice(geluAVX512, 16, y, x) }

// geluGradAVX512Slice is geluAVX2Slice for geluGradAVX512.
func geluGradAVX512Slice(dx, x, dy []float32) { geluGradSlice(geluGradAVX512, 16, dx, x, dy) }

// geluSlice runs the forward kernel k (on whole vectors of w <= 16) over
// x's whole vectors, then over the rest padded with zeros on the stack.
func geluSlice(k func(y, x *float32, n int), w int, y, x []float32) {
	y = y[:len(x)]
	n := len(x) / w * w
	if n > 0 {
		k(&y[0], &x[0], n)
	}
	if n < len(x) {
		var buf [16]float32
		copy(buf[:], x[n:])
		k(&buf[0], &buf[0], w)
		copy(y[n:], buf[:])
	}
}

// geluGradSlice is geluSlice for a gradient kernel k.
func geluGradSlice(k func(dx, x, dy *float32, n int), w int, dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	n := len(x) / w * w
	if n > 0 {
		k(&dx[0], &x[0], &dy[0], n)
	}
	if n < len(x) {
		var xb, dyb [16]float32
		copy(xb[:], x[n:])
		copy(dyb[:], dy[n:])
		k(&xb[0], &xb[0], &dyb[0], w)
		copy(dx[n:], xb[:])
	}
}
