package main

// The fits of the GELU polynomials (`go run . -fit` prints them in the form
// of internal/vec/gelu.go). Each is a near-minimax fit of relative error:
// least squares on 2000 Chebyshev points, reweighted by Lawson's algorithm
// (w_i *= |err_i|) 200 times, the coefficients then rounded to float32 one
// at a time, lowest degree first, refitting the rest after each rounding.
// G, the sensitivity of R to the rounding of t, only needs a few percent:
// plain least squares.

import (
	"fmt"
	"math"
)

const (
	fitPoints = 2000
	fitIters  = 200
)

// lstsq solves min ||A c - b|| by Householder QR.
func lstsq(A [][]float64, b []float64) []float64 {
	m, n := len(A), len(A[0])
	a := make([][]float64, m)
	for i := range a {
		a[i] = append([]float64(nil), A[i]...)
	}
	y := append([]float64(nil), b...)
	v := make([]float64, m)
	for j := 0; j < n; j++ {
		var norm float64
		for i := j; i < m; i++ {
			norm += a[i][j] * a[i][j]
		}
		norm = math.Sqrt(norm)
		if a[j][j] > 0 {
			norm = -norm
		}
		var vv float64
		for i := j; i < m; i++ {
			v[i] = a[i][j]
			if i == j {
				v[i] -= norm
			}
			vv += v[i] * v[i]
		}
		if vv == 0 {
			continue
		}
		reflect := func(col func(i int) *float64) {
			var s float64
			for i := j; i < m; i++ {
				s += v[i] * *col(i)
			}
			s *= 2 / vv
			for i := j; i < m; i++ {
				*col(i) -= s * v[i]
			}
		}
		for k := j; k < n; k++ {
			reflect(func(i int) *float64 { return &a[i][k] })
		}
		reflect(func(i int) *float64 { return &y[i] })
	}
	c := make([]float64, n)
	for j := n - 1; j >= 0; j-- {
		s := y[j]
		for k := j + 1; k < n; k++ {
			s -= a[j][k] * c[k]
		}
		c[j] = s / a[j][j]
	}
	return c
}

// polyEval evaluates Σ c[j]·t^j.
func polyEval(c []float64, t float64) float64 {
	s := 0.0
	for j := len(c) - 1; j >= 0; j-- {
		s = s*t + c[j]
	}
	return s
}

// fitRel returns the coefficients of degree <= deg minimising the maximum
// relative error against fs at ts, the first len(fixed) given.
func fitRel(ts, fs []float64, deg int, fixed []float64) []float64 {
	w := make([]float64, len(ts))
	for i := range w {
		w[i] = 1
	}
	nf := len(fixed)
	var c []float64
	for range fitIters {
		A := make([][]float64, len(ts))
		b := make([]float64, len(ts))
		for i, t := range ts {
			row := make([]float64, deg+1-nf)
			sc := w[i] / fs[i]
			p, r := 1.0, fs[i]
			for j := 0; j <= deg; j++ {
				if j < nf {
					r -= fixed[j] * p
				} else {
					row[j-nf] = p * sc
				}
				p *= t
			}
			A[i], b[i] = row, r*sc
		}
		c = append(append([]float64(nil), fixed...), lstsq(A, b)...)
		var sum float64
		for i, t := range ts {
			w[i] *= math.Abs(polyEval(c, t)/fs[i] - 1)
			sum += w[i]
		}
		for i := range w {
			w[i] = max(w[i]/sum*float64(len(w)), 1e-30)
		}
	}
	return c
}

// fitRel32 is fitRel with float32 coefficients (times scale, a power of
// 2), rounded one at a time.
func fitRel32(ts, fs []float64, deg int, fixed []float64, scale float64) []float64 {
	for j := len(fixed); j <= deg; j++ {
		c := fitRel(ts, fs, deg, fixed)
		fixed = append(fixed, float64(float32(c[j]*scale))/scale)
	}
	return fixed
}

// chebPoints returns fitPoints Chebyshev points of [lo, hi] and f there.
func chebPoints(lo, hi float64, f func(float64) float64) (ts, fs []float64) {
	for i := range fitPoints {
		u := math.Cos(math.Pi * (float64(i) + 0.5) / fitPoints)
		t := lo + (hi-lo)*(u+1)/2
		ts, fs = append(ts, t), append(fs, f(t))
	}
	return ts, fs
}

// worstRel is the largest relative error of c against f on a fine grid.
func worstRel(c []float64, lo, hi float64, f func(float64) float64) float64 {
	var worst float64
	for i := 0; i <= 20000; i++ {
		t := lo + (hi-lo)*float64(i)/20000
		if v := f(t); v != 0 {
			worst = max(worst, math.Abs(polyEval(c, t)/v-1))
		}
	}
	return worst
}

func fitAll() {
	k := float64(float32(geluK))
	tA := 1 / (1 + k*geluClamp)
	// R(t) = erfc(z)·exp(z²)/t, z = a/√2, a = (1/t - 1)/k; stored halved.
	R := func(t float64) float64 {
		z := (1/t - 1) / k / math.Sqrt2
		return math.Erfc(z) * math.Exp(z*z) / t
	}
	ts, fs := chebPoints(tA, 1, R)
	r := fitRel32(ts, fs, 9, nil, 0.5)
	fmt.Printf("// R: worst relative error %.3g over t in [%.4f, 1]\n", worstRel(r, tA, 1, R), tA)
	printCoefs("geluR", r, 0.5)

	const rMax = 0.3466 // ln2/2 and a margin for wlo
	ts, fs = chebPoints(-rMax, rMax, math.Exp)
	e := fitRel32(ts, fs, 6, []float64{1}, 1)
	fmt.Printf("// exp: worst relative error %.3g over |r| <= %g\n", worstRel(e, -rMax, rMax, math.Exp), rMax)
	printCoefs("geluExp", e[1:], 1)

	// erf(x/√2)/x as a polynomial in s = x²/2.
	erfOverX := func(s float64) float64 {
		if s == 0 {
			return math.Sqrt(2 / math.Pi)
		}
		x := math.Sqrt(2 * s)
		return math.Erf(x/math.Sqrt2) / x
	}
	sMax := erfBound * erfBound / 2
	ts, fs = chebPoints(0, sMax, erfOverX)
	q := fitRel32(ts, fs, 4, nil, 1)
	fmt.Printf("// erf: worst relative error %.3g over |x| < %g\n", worstRel(q, 0, sMax, erfOverX), erfBound)
	printCoefs("geluErf", q, 1)

	// G(t) ≈ 1 + t·R'(t)/R(t) of the rounded R, by least squares.
	var A [][]float64
	var gs []float64
	for i := 0; i <= 400; i++ {
		t := tA + (1-tA)*float64(i)/400
		var rv, dr, pw float64 = 0, 0, 1
		for j, c := range r {
			rv += c * pw
			if j+1 < len(r) {
				dr += float64(j+1) * r[j+1] * pw
			}
			pw *= t
		}
		A = append(A, []float64{1, t, t * t})
		gs = append(gs, 1+t*dr/rv)
	}
	g := lstsq(A, gs)
	var worst float64
	for i, row := range A {
		worst = max(worst, math.Abs(polyEval(g, row[1])-gs[i]))
	}
	fmt.Printf("// G: worst absolute error %.3g\n", worst)
	for j := range g {
		g[j] = float64(float32(g[j]))
	}
	printCoefs("geluG", g, 1)
}

// printCoefs prints c·scale as a Go float32 slice literal.
func printCoefs(name string, c []float64, scale float64) {
	fmt.Printf("%s = []float32{", name)
	for j, v := range c {
		if j > 0 {
			fmt.Print(", ")
		}
		fmt.Print(float32(v * scale))
	}
	fmt.Println("}")
}
