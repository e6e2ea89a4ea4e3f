package models

import "math"

const (
	tableMin = -4                       // the tables cover [tableMin, -tableMin] and half a step beyond
	tablePer = 32                       // polynomial centres per unit of x
	tableLen = -2*tableMin*tablePer + 1 // centres tableMin + k/tablePer, k in [0, tableLen)

	roundMagic     = 0x1.8p52           // adding it rounds to an integer: bits(u+magic) - bits(magic) = round(u)
	roundMagicBits = 0x4338000000000000 // math.Float64bits(roundMagic)
)

// xTable is a function of x as one polynomial per centre c_k = tableMin +
// k/tablePer, in r = (x - c_k)·tablePer in [-0.5, 0.5]. Its lookup, written
// out in the kernels' loops (the compiler would not inline it):
//
//	u := (x - tableMin) * tablePer
//	uf := u + roundMagic
//	k := int64(math.Float64bits(uf) - roundMagicBits) // round(u)
//	if uint64(k) < tableLen { // false also for NaN and ±Inf
//		v := table[k].at(u - (uf - roundMagic))
//	}
type xTable [tableLen]poly5

// newXTable interpolates f around every centre: chebInterp on
// [c_k - h, c_k + h], h = 1/(2·tablePer), in s = 2r, rescaled to r.
func newXTable(f func(x float64) float64) (t xTable) {
	for k := range t {
		c := tableMin + float64(k)/tablePer
		p := chebInterp(func(s float64) float64 { return f(c + s/(2*tablePer)) })
		for j := range p {
			p[j] *= math.Ldexp(1, j) // q(s) = q(2r)
		}
		t[k] = p
	}
	return t
}

// The tables of the GELU kernels, made at start-up from math.Erfc and
// math.Exp (2 × 257 polynomials, 25 KB): Φ(x) (relative error about
// 1e-12, far below a float32 ulp, also in the lower tail, where
// 1+erf(x/√2) would cancel), and GELU'(x) = Φ(x) + x·φ(x) (absolute error
// about 1e-14).
var (
	phiTable   = newXTable(func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) })
	slopeTable = newXTable(func(x float64) float64 {
		return 0.5*math.Erfc(-x/math.Sqrt2) + x*math.Exp(-0.5*x*x)*invSqrt2Pi
	})
)

// poly5 are the coefficients of a degree-5 polynomial, lowest first.
type poly5 [6]float64

// at evaluates p(r) by Estrin's scheme (a dependency chain of three
// multiply-adds instead of Horner's five).
func (p *poly5) at(r float64) float64 {
	r2 := r * r
	return (p[0] + p[1]*r) + (p[2]+p[3]*r)*r2 + (p[4]+p[5]*r)*(r2*r2)
}

// chebInterp returns, as monomial coefficients, the polynomial of degree
// 5 that interpolates f at the Chebyshev nodes of [-1, 1] (within a small
// factor of the best approximation of that degree).
func chebInterp(f func(float64) float64) poly5 {
	const n = len(poly5{})
	const nf = float64(n)
	var fv [n]float64
	for k := range fv {
		fv[k] = f(math.Cos(math.Pi * (float64(k) + 0.5) / nf))
	}
	var p poly5
	// T_j as monomial coefficients, by T_j = 2s·T_{j-1} - T_{j-2}.
	var tPrev, tCur poly5
	tPrev[0], tCur[1] = 1, 1
	for j := 0; j < n; j++ {
		a := 0.0 // the Chebyshev coefficient of T_j
		for k, v := range fv {
			a += v * math.Cos(math.Pi*float64(j)*(float64(k)+0.5)/nf)
		}
		a *= 2 / nf
		if j == 0 {
			a /= 2
		}
		tj := tPrev
		if j == 1 {
			tj = tCur
		} else if j > 1 {
			var next poly5
			for m := 0; m+1 < n; m++ {
				next[m+1] += 2 * tCur[m]
			}
			for m := range next {
				next[m] -= tPrev[m]
			}
			tPrev, tCur = tCur, next
			tj = next
		}
		for m := range p {
			p[m] += a * tj[m]
		}
	}
	return p
}

// normCDF is Φ(x) = erfc(-x/√2)/2, the standard normal CDF, for the
// float32 GELU kernels, in float64 and without a branch. With z = |x|/√2
// and t = 1/(1 + 0.4z), erfc(z) = t·exp(-z² + P(u)), u = 2.5t - 1.5 in
// [-1, 1] for z in [0, 10] and P of degree 10 (the form of Numerical Recipes'
// erfcc, refitted minimax for relative error: below 4e-9 over [0, 10], a
// fifteenth of a float32 ulp, so Φ(x) is accurate relative to itself also
// in the lower tail, where 1+erf(x/√2) would cancel). Beyond z = 10,
// erfc(z) < 2e-45 rounds to 0 in float32 and exp returns 0.
func normCDF(x float64) float64 {
	const (
		p0  = -0.70559946240304594
		p1  = 0.65294359869429286
		p2  = 0.078538623388455561
		p3  = -0.018939676271913758
		p4  = -0.0092990804985107131
		p5  = 0.0013603511948552206
		p6  = 0.0013038482235210669
		p7  = -0.00015678803091211997
		p8  = -0.00018951541984379118
		p9  = 1.8074565891425821e-05
		p10 = 2.0030504564519207e-05
	)
	z := min(math.Abs(x)*(1/math.Sqrt2), 10)
	t := 1 / (1 + 0.4*z)
	u := 2.5*t - 1.5
	// P(u) by Estrin's scheme: a dependency chain of 4 multiply-adds
	// instead of Horner's 10.
	u2 := u * u
	u4 := u2 * u2
	q := (p0 + p1*u + (p2+p3*u)*u2) + (p4+p5*u+(p6+p7*u)*u2)*u4 + (p8+p9*u+p10*u2)*(u4*u4)
	h := 0.5 * t * expFast(q-z*z) // Φ(-|x|)
	// Φ(x) = h for x < 0 (exactly), 1-h for x >= 0, selected by the sign bit.
	pos := float64(int64(1 - math.Float64bits(x)>>63))
	return h + pos*(1-2*h)
}
