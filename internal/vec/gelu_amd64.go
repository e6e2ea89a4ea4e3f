//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/gelu . -out ../../gelu_amd64.s -stubs ../../gelu_amd64_stubs.go -pkg vec

// geluImpls lists the implementations of GELU this CPU supports, best
// first: the AVX2+FMA kernels when x/sys/cpu reports both (it reports AVX2
// only when the OS saves the YMM registers), then the pure-Go loops.
func geluImpls() []geluImpl {
	ims := []geluImpl{{name: "go", fwd: geluGo, grad: geluGradGo}}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ims = append([]geluImpl{{name: "avx2", fwd: geluAVX2Slice, grad: geluGradAVX2Slice}}, ims...)
	}
	return ims
}

// geluAVX2Slice runs geluAVX2 over the whole vectors of x, then over the
// last partial vector padded with zeros in a stack copy, so that every
// element goes through the same kernel whatever the length.
func geluAVX2Slice(y, x []float32) {
	y = y[:len(x)]
	n := len(x) &^ 7
	if n > 0 {
		geluAVX2(&y[0], &x[0], n)
	}
	if n < len(x) {
		var buf [8]float32
		copy(buf[:], x[n:])
		geluAVX2(&buf[0], &buf[0], 8)
		copy(y[n:], buf[:])
	}
}

// geluGradAVX2Slice is geluAVX2Slice for geluGradAVX2.
func geluGradAVX2Slice(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	n := len(x) &^ 7
	if n > 0 {
		geluGradAVX2(&dx[0], &x[0], &dy[0], n)
	}
	if n < len(x) {
		var xb, dyb [8]float32
		copy(xb[:], x[n:])
		copy(dyb[:], dy[n:])
		geluGradAVX2(&xb[0], &xb[0], &dyb[0], 8)
		copy(dx[n:], xb[:])
	}
}
