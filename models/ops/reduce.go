package ops

// Row reductions of the kernels, in float64 with four accumulators: four
// independent chains of additions instead of one, in a fixed order (lane
// i%4, then the lanes summed as (0+1)+(2+3)), so results are
// reproducible. Slices are consumed four at a time, which also lets the
// compiler drop the bounds checks.

// moments4 is Σ x and Σ x², in one pass.
func moments4[F float](x []F) (s, ss float64) {
	var s0, s1, s2, s3, q0, q1, q2, q3 float64
	for len(x) >= 4 {
		v := x[:4]
		a0, a1, a2, a3 := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
		s0 += a0
		s1 += a1
		s2 += a2
		s3 += a3
		q0 += a0 * a0
		q1 += a1 * a1
		q2 += a2 * a2
		q3 += a3 * a3
		x = x[4:]
	}
	for _, v := range x {
		a := float64(v)
		s0 += a
		q0 += a * a
	}
	return (s0 + s1) + (s2 + s3), (q0 + q1) + (q2 + q3)
}

// dot4 is Σ a·b over a's length (b at least as long).
func dot4[F float](a, b []F) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	for len(a) >= 4 {
		u, v := a[:4], b[:4]
		s0 += float64(u[0]) * float64(v[0])
		s1 += float64(u[1]) * float64(v[1])
		s2 += float64(u[2]) * float64(v[2])
		s3 += float64(u[3]) * float64(v[3])
		a, b = a[4:], b[4:]
	}
	for i, u := range a {
		s0 += float64(u) * float64(b[i])
	}
	return (s0 + s1) + (s2 + s3)
}
