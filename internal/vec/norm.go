package vec

import "fmt"

// This file holds the LayerNorm row primitives and their pure-Go
// fallbacks (the ...Go functions). Where normAsm is set (norm_amd64.go,
// norm_arm64.go) the primitives call this build's kernels (the ...Asm
// functions: AVX2 in norm_amd64.s, NEON in norm_arm64.s) for the whole
// vectors, and the fallbacks for the rest; a call level fewer saved about
// a fifth of a 128-float row's time. A row has C = len(x) channels; the
// statistics are accumulated in float64 from exactly widened float32s.
//
// The elementwise ops (LNRow, LNGradXRow, LNGradWAccum) perform, element
// by element, the IEEE operations of their doc comments in that order,
// each rounded, in the kernels and in the Go code, so they give bitwise
// the same results (a NaN stays a NaN; its payload may differ). Every
// product the Go code adds to or subtracts from something is wrapped in an
// explicit conversion: without it the compiler may fuse x*y+z into an FMA
// (it does under GOAMD64=v3, and on arm64), which rounds once instead of
// twice.
//
// The sums (Moments, LNGradSums) keep L float64 lanes per sum (L = 16 for
// Moments, 8 for LNGradSums): element j of each whole L-element chunk goes
// to lane j, then each remaining whole group of 4 to lanes 0-3; the lane
// groups A0, A1, ... of 4 are combined as (A0+A1)+(A2+A3) (or A0+A1), the
// four results v0..v3 as (v0+v2)+(v1+v3), and the last len%4 elements are
// added to that in order. The kernels do the same additions, so the sums
// too are bitwise equal on every path, and depend only on the data and its
// length.
//
// Aliasing: an output may be the same slice as an input where the doc
// comment says so (element for element); partial overlaps are not
// supported.

// Moments returns Σx and Σx² in float64 (see the summation order above).
func Moments(x []float32) (s, ss float64) {
	n4 := len(x) &^ 3
	if normAsm && n4 > 0 {
		s, ss = momentsAsm(&x[0], n4)
	} else {
		s, ss = momentsGo(x[:n4])
	}
	for _, v := range x[n4:] {
		a := float64(v)
		s += a
		ss += float64(a * a)
	}
	return s, ss
}

// LNGradSums returns Σx, Σx², Σg and Σg·x over a row, g =
// float64(dy)·float64(w), in float64 (see the summation order above): the
// sums LayerNorm's input gradient needs. It panics if w or dy is shorter
// than x.
func LNGradSums(x, w, dy []float32) (sx, sxx, sg, sgx float64) {
	if len(w) < len(x) || len(dy) < len(x) {
		panic(fmt.Sprintf("vec.LNGradSums: len(w) = %d, len(dy) = %d, want >= len(x) = %d", len(w), len(dy), len(x)))
	}
	n4 := len(x) &^ 3
	if normAsm && n4 > 0 {
		sx, sxx, sg, sgx = lnGradSumsAsm(&x[0], &w[0], &dy[0], n4)
	} else {
		sx, sxx, sg, sgx = lnGradSumsGo(x[:n4], w[:n4], dy[:n4])
	}
	for c := n4; c < len(x); c++ {
		a, g := float64(x[c]), float64(float64(dy[c])*float64(w[c]))
		sx += a
		sxx += float64(a * a)
		sg += g
		sgx += float64(g * a)
	}
	return sx, sxx, sg, sgx
}

// LNRow normalises a row: y[c] = float32((float64(x[c])-mean)*rstd)*w[c]
// + b[c] for c < len(y), the last product and sum in float32, as
// models.lnForward. y may be x. It panics if x, w or b is shorter than y.
func LNRow(y, x, w, b []float32, mean, rstd float64) {
	n := len(y)
	if len(x) < n || len(w) < n || len(b) < n {
		panic(fmt.Sprintf("vec.LNRow: len(x) = %d, len(w) = %d, len(b) = %d, want >= len(y) = %d", len(x), len(w), len(b), n))
	}
	m := 0 // elements done by the kernel: whole vectors of 8
	if normAsm && n >= 8 {
		m = n &^ 7
		lnRowAsm(&y[0], &x[0], &w[0], &b[0], m, mean, rstd)
	}
	if m < n {
		lnRowGo(y[m:n], x[m:n], w[m:n], b[m:n], mean, rstd)
	}
}

// LNGradXRow sets dx[c] = float32(rstd*(g - sg - xhat*sgx)) for
// c < len(dx), with g = float64(dy[c])*float64(w[c]) and xhat =
// (float64(x[c])-mean)*rstd, as models.lnBackwardX (sg is the row mean of
// g, sgx that of g·xhat). dx may be x or dy. It panics if x, w or dy is
// shorter than dx.
func LNGradXRow(dx, x, w, dy []float32, mean, rstd, sg, sgx float64) {
	n := len(dx)
	if len(x) < n || len(w) < n || len(dy) < n {
		panic(fmt.Sprintf("vec.LNGradXRow: len(x) = %d, len(w) = %d, len(dy) = %d, want >= len(dx) = %d", len(x), len(w), len(dy), n))
	}
	m := 0 // elements done by the kernel: whole vectors of 8
	if normAsm && n >= 8 {
		m = n &^ 7
		lnGradXRowAsm(&dx[0], &x[0], &w[0], &dy[0], m, mean, rstd, sg, sgx)
	}
	if m < n {
		lnGradXRowGo(dx[m:n], x[m:n], w[m:n], dy[m:n], mean, rstd, sg, sgx)
	}
}

// LNGradWAccum adds one row's contribution to LayerNorm's weight
// gradient: acc[c] += float64(dy[c]) * (float64(x[c]) - mean) * rstd for
// c < len(acc), evaluated left to right, as models.lnBackwardW. It panics
// if x or dy is shorter than acc.
func LNGradWAccum(acc []float64, x, dy []float32, mean, rstd float64) {
	n := len(acc)
	if len(x) < n || len(dy) < n {
		panic(fmt.Sprintf("vec.LNGradWAccum: len(x) = %d, len(dy) = %d, want >= len(acc) = %d", len(x), len(dy), n))
	}
	m := 0 // elements done by the kernel: whole vectors of 8
	if normAsm && n >= 8 {
		m = n &^ 7
		lnGradWAccumAsm(&acc[0], &x[0], &dy[0], m, mean, rstd)
	}
	if m < n {
		lnGradWAccumGo(acc[m:n], x[m:n], dy[m:n], mean, rstd)
	}
}

// sumLanesGo combines the lane accumulators of one sum, 8 or 16 of them,
// as the kernels do: (A0+A1)+(A2+A3) (or A0+A1) lane by lane, then
// (v0+v2)+(v1+v3).
func sumLanesGo(a []float64) float64 {
	var v [4]float64
	for j := range v {
		if len(a) == 16 {
			v[j] = (a[j] + a[4+j]) + (a[8+j] + a[12+j])
		} else {
			v[j] = a[j] + a[4+j]
		}
	}
	return (v[0] + v[2]) + (v[1] + v[3])
}

// momentsGo is the fallback of the lane part of Moments; len(x) is a
// multiple of 4. It sums the lanes 4 at a time, each group of lanes over
// its elements in order (lanes are independent, so this is the kernel's
// order), to keep the accumulators in registers.
func momentsGo(x []float32) (s, ss float64) {
	whole := len(x) &^ 15
	var a, q [16]float64
	for o := 0; o < 16; o += 4 {
		sa, sq := (*[4]float64)(a[o:o+4]), (*[4]float64)(q[o:o+4])
		momentLanes(x, o, whole, 16, sa, sq)
		if o == 0 {
			momentLanes(x, whole, len(x), 4, sa, sq) // groups left over
		}
	}
	return sumLanesGo(a[:]), sumLanesGo(q[:])
}

// momentLanes adds x[i+j] and its square to lane j of s and q, for
// i = from, from+step, ... < to and j < 4.
func momentLanes(x []float32, from, to, step int, s, q *[4]float64) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	q0, q1, q2, q3 := q[0], q[1], q[2], q[3]
	for i := from; i < to; i += step {
		v := x[i : i+4]
		a0, a1, a2, a3 := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
		s0, s1, s2, s3 = s0+a0, s1+a1, s2+a2, s3+a3
		q0, q1 = q0+float64(a0*a0), q1+float64(a1*a1)
		q2, q3 = q2+float64(a2*a2), q3+float64(a3*a3)
	}
	*s = [4]float64{s0, s1, s2, s3}
	*q = [4]float64{q0, q1, q2, q3}
}

// lnGradSumsGo is the fallback of the lane part of LNGradSums; the slices
// have equal lengths, a multiple of 4. As momentsGo, it sums lanes 0-3
// (the first half of each 8-element chunk, then a group of 4 left over)
// and lanes 4-7 separately.
func lnGradSumsGo(x, w, dy []float32) (sx, sxx, sg, sgx float64) {
	w, dy = w[:len(x)], dy[:len(x)]
	var a, b, c, d [8]float64
	for o := 0; o < 8; o += 4 {
		gradLanes(x, w, dy, o, len(x), 8,
			(*[4]float64)(a[o:o+4]), (*[4]float64)(b[o:o+4]), (*[4]float64)(c[o:o+4]), (*[4]float64)(d[o:o+4]))
	}
	return sumLanesGo(a[:]), sumLanesGo(b[:]), sumLanesGo(c[:]), sumLanesGo(d[:])
}

// gradLanes adds x, x², g and g·x of element i+j (g = dy·w) to lane j of
// a, b, c and d, for i = from, from+step, ... with i+4 <= to, and j < 4.
func gradLanes(x, w, dy []float32, from, to, step int, a, b, c, d *[4]float64) {
	a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
	b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
	c0, c1, c2, c3 := c[0], c[1], c[2], c[3]
	d0, d1, d2, d3 := d[0], d[1], d[2], d[3]
	for i := from; i+4 <= to; i += step {
		u, wv, dv := x[i:i+4], w[i:i+4], dy[i:i+4]
		x0, x1, x2, x3 := float64(u[0]), float64(u[1]), float64(u[2]), float64(u[3])
		g0 := float64(float64(dv[0]) * float64(wv[0]))
		g1 := float64(float64(dv[1]) * float64(wv[1]))
		g2 := float64(float64(dv[2]) * float64(wv[2]))
		g3 := float64(float64(dv[3]) * float64(wv[3]))
		a0, a1, a2, a3 = a0+x0, a1+x1, a2+x2, a3+x3
		b0, b1 = b0+float64(x0*x0), b1+float64(x1*x1)
		b2, b3 = b2+float64(x2*x2), b3+float64(x3*x3)
		c0, c1, c2, c3 = c0+g0, c1+g1, c2+g2, c3+g3
		d0, d1 = d0+float64(g0*x0), d1+float64(g1*x1)
		d2, d3 = d2+float64(g2*x2), d3+float64(g3*x3)
	}
	*a = [4]float64{a0, a1, a2, a3}
	*b = [4]float64{b0, b1, b2, b3}
	*c = [4]float64{c0, c1, c2, c3}
	*d = [4]float64{d0, d1, d2, d3}
}

// lnRowGo is the fallback of LNRow; the slices have equal lengths.
func lnRowGo(y, x, w, b []float32, mean, rstd float64) {
	x, w, b = x[:len(y)], w[:len(y)], b[:len(y)]
	for c := range y {
		xhat := float32(float64(float64(x[c])-mean) * rstd)
		y[c] = float32(xhat*w[c]) + b[c]
	}
}

// lnGradXRowGo is the fallback of LNGradXRow; the slices have equal
// lengths.
func lnGradXRowGo(dx, x, w, dy []float32, mean, rstd, sg, sgx float64) {
	x, w, dy = x[:len(dx)], w[:len(dx)], dy[:len(dx)]
	for c := range dx {
		g := float64(float64(dy[c]) * float64(w[c]))
		xhat := float64(float64(float64(x[c])-mean) * rstd)
		dx[c] = float32(rstd * ((g - sg) - float64(xhat*sgx)))
	}
}

// lnGradWAccumGo is the fallback of LNGradWAccum; the slices have equal
// lengths.
func lnGradWAccumGo(acc []float64, x, dy []float32, mean, rstd float64) {
	x, dy = x[:len(acc)], dy[:len(acc)]
	for c := range acc {
		p := float64(float64(dy[c]) * float64(float64(x[c])-mean))
		acc[c] += float64(p * rstd)
	}
}
