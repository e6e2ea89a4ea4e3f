//go:build arm64 && !purego

package vec

import "golang.org/x/sys/cpu"

// geluNEON sets y[i] = GELU(x[i]) for i < n, n a multiple of 4.
//
//go:noescape
func geluNEON(y, x *float32, n int)

// geluGradNEON sets dx[i] = dy[i]·GELU'(x[i]) for i < n, n a multiple of 4.
//
//go:noescape
func geluGradNEON(dx, x, dy *float32, n int)

// geluImpls lists the implementations of GELU this CPU supports, best
// first: the NEON kernels (gelu_arm64.s) when x/sys/cpu reports Advanced
// SIMD (every arm64 CPU Go runs on), then the pure-Go loops.
func geluImpls() []geluImpl {
	ims := []geluImpl{{name: "go", fwd: geluGo, grad: geluGradGo}}
	if cpu.ARM64.HasASIMD {
		ims = append([]geluImpl{{name: "neon", fwd: geluNEONSlice, grad: geluGradNEONSlice}}, ims...)
	}
	return ims
}

// geluNEONSlice runs geluNEON over the whole vectors of x, then over the
// last partial vector padded with zeros in a stack copy, so that every
// element goes through the same kernel whatever the length.
func geluNEONSlice(y, x []float32) {
	y = y[:len(x)]
	n := len(x) &^ 3
	if n > 0 {
		geluNEON(&y[0], &x[0], n)
	}
	if n < len(x) {
		var buf [4]float32
		copy(buf[:], x[n:])
		geluNEON(&buf[0], &buf[0], 4)
		copy(y[n:], buf[:])
	}
}

// geluGradNEONSlice is geluNEONSlice for geluGradNEON.
func geluGradNEONSlice(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	n := len(x) &^ 3
	if n > 0 {
		geluGradNEON(&dx[0], &x[0], &dy[0], n)
	}
	if n < len(x) {
		var xb, dyb [4]float32
		copy(xb[:], x[n:])
		copy(dyb[:], dy[n:])
		geluGradNEON(&xb[0], &xb[0], &dyb[0], 4)
		copy(dx[n:], xb[:])
	}
}
