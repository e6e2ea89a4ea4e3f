package vec

import (
	"fmt"
	"math"
)

// GELU sets y[i] = x[i]·Φ(x[i]), Φ the standard normal CDF
// (= 0.5·erfc(-x/√2)): the exact GELU of torch's
// F.gelu(approximate="none"). y may be x; otherwise y and x must not
// overlap. It panics if len(y) != len(x).
//
// Accuracy, against float64 math.Erfc: within 4 float32 ulp wherever
// |y| >= 1e-30, also in the lower tail (x down to about -11.9), where
// 1+erf(x/√2) would cancel (TestGELUAccuracy measures the worst case).
// Special values: NaN gives NaN, GELU(+Inf) = +Inf, GELU(-Inf) = NaN (as
// x·Φ(x) = -Inf·0 in torch), GELU(±0) = +0, and x < -13.25 gives -0.
func GELU(y, x []float32) {
	if len(y) != len(x) {
		panic(fmt.Sprintf("vec: GELU: len(y) = %d, len(x) = %d", len(y), len(x)))
	}
	geluBest.fwd(y, x)
}

// GELUGrad sets dx[i] = dy[i]·GELU'(x[i]), GELU'(x) = Φ(x) + x·φ(x) with
// φ(x) = exp(-x²/2)/√(2π): the slope is computed to within 4·2^-24 of
// its exact value (it lies in [-0.17, 1.13]) and multiplied by dy once.
// dx may be x or dy; otherwise the slices must not overlap. It panics
// unless the three lengths are equal.
//
// Special values: NaN in x or dy gives NaN; the slope is 1 at +Inf and 0
// at -Inf (as its limits), so dx = dy there.
func GELUGrad(dx, x, dy []float32) {
	if len(dx) != len(x) || len(dy) != len(x) {
		panic(fmt.Sprintf("vec: GELUGrad: len(dx) = %d, len(x) = %d, len(dy) = %d", len(dx), len(x), len(dy)))
	}
	geluBest.grad(dx, x, dy)
}

// geluImpl is one implementation of GELU and GELUGrad (the assembly
// kernel or the pure-Go loop), for the dispatch and the tests.
type geluImpl struct {
	name string
	fwd  func(y, x []float32)
	grad func(dx, x, dy []float32)
}

// geluBest is the fastest implementation this CPU supports.
var geluBest = geluImpls()[0]

// geluGo is the pure-Go fallback: per element, the algorithm of the
// assembly kernel (asm/gelu/main.go), in float32 with the FMAs emulated
// in float64.
func geluGo(y, x []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] = gelu1(v)
	}
}

// geluGradGo is the pure-Go GELUGrad.
func geluGradGo(dx, x, dy []float32) {
	dx, dy = dx[:len(x)], dy[:len(x)]
	for i, v := range x {
		dx[i] = dy[i] * geluSlope1(v)
	}
}

// The algorithm, shared with the assembly kernel (asm/gelu/main.go holds
// the same constants; TestGELUImplsAgree catches a drift). With
// a = min(|x|, geluClamp) and z = a/√2:
//
//   - erfc(z)/2 = q·exp(-z²), q = t·R(t), t = 1/(1 + geluK·a), R a
//     polynomial of degree 9 (the form of Numerical Recipes' erfcc,
//     refitted for relative error, 8e-9, over a in [0, 13.25]; by Horner's
//     rule: E(t²) + t·O(t²), with shorter dependency chains, was not
//     faster and cost 0.4 ulp in the worst case).
//     The rounding of t, which R amplifies, is undone to first order: d =
//     1+geluK·a is split into d + dlo, corr = 1 - (d+dlo)·t is exact to
//     first order, and q·(1 + corr·G(t)) is the q of the exact t, with
//     G(t) ≈ 1 + t·R'(t)/R(t).
//   - exp(-z²) = exp(whi + wlo) with whi = -a²/2 rounded and wlo its
//     rounding error (recovered by an FMA), so the tail keeps its relative
//     accuracy where -z² reaches -88; 2^n·(1 + pm1), n = round(whi·log2 e),
//     r = whi - n·ln2 (Cody–Waite, the high part exact by the FMA) + wlo,
//     pm1 = exp(r)-1 by a degree-6 polynomial. n >= -127; the scale 2^n is
//     built in the exponent bits, and n = -127 gives 0, so a = geluClamp
//     gives exactly exp = 0 (and GELU(-Inf) = -Inf·0 = NaN).
//   - P = xu·Φ(-|x|), xu = min(x, geluClamp), the product
//     xu·t·R·(1+pm1)·(1+corr·G) rounded as few times as possible: m =
//     (1+pm1)(1+corr·G) - 1, X = xu·t with its rounding error Xe, P =
//     (X·R + (X·m + Xe)·R)·2^n. y = P for x < 0 (relative to Φ(x) itself),
//     y = x - P for x >= 0. (xu, not xc, so that GELU(-Inf) = NaN and
//     GELU(+Inf) = +Inf.)
//   - s = x·x/2 < geluErfBound²/2: y = x/2 + s·Q(s), Q(s) = erf(x/√2)/x of
//     degree 4, where the rounding of Φ around 1/2 would cost ulps of y.
//
// The slope is Φ(x) + x·φ(x) = D for x < 0 and 1 - D otherwise, D =
// Φ(-|x|) - |x|·φ(x) (geluSlope1).
const (
	geluClamp      = 13.25 // |x| is clamped here: exp(-x²/2) is exactly 0 beyond
	geluK          = 0.3   // t = 1/(1 + geluK·|x|)
	geluErfBound   = 0.75  // |x| below it takes the erf branch
	geluLog2e      = 1.442695040888963
	geluMagic      = 0x1.8p23 // fma(w, geluLog2e, geluMagic) rounds w·log2(e) to an integer in its low mantissa bits
	geluLn2Hi      = float32(0.6931471805599453)
	geluLn2Lo      = float32(-1.9046542e-09) // ln 2 - geluLn2Hi
	geluInvSqrt2Pi = 0.3989422804014327
)

// The coefficients, lowest degree first, fitted by asm/gelu/fit.go: R
// (halved, so q is erfc/2), exp(r)-1 for r in [-ln2/2, ln2/2] (e1..e6),
// erf(x/√2)/x in s = x²/2, and G.
var (
	geluR   = [10]float32{0.119685, 0.11960662, 0.10992912, 0.07990552, 0.09150309, -0.07022055, 0.18004525, -0.21888518, 0.10823871, -0.019807573}
	geluExp = [6]float32{1, 0.49999997, 0.1666653, 0.041667774, 0.008367849, 0.001384025}
	geluErf = [5]float32{0.7978846, -0.26596388, 0.07982745, -0.019180099, 0.0037944168}
	geluG   = [3]float32{0.8406503, 1.801386, 0.054121792}
)

// geluFMA is a·b+c rounded to float32: a·b is exact in float64, so only the
// sum rounds there, then to float32 (a double rounding, rarely 1 ulp off a
// hardware FMA).
func geluFMA(a, b, c float32) float32 {
	return float32(float64(a)*float64(b) + float64(c))
}

// geluPoly evaluates c[0] + t·(c[1] + t·(...)).
func geluPoly(c []float32, t float32) float32 {
	p := c[len(c)-1]
	for j := len(c) - 2; j >= 0; j-- {
		p = geluFMA(p, t, c[j])
	}
	return p
}

// geluTail holds the erfc-branch quantities of one element.
type geluTail struct {
	xu    float32 // min(x, geluClamp)
	xc    float32 // x clamped to [-geluClamp, geluClamp]
	t, r  float32 // t and R(t)
	m     float32 // (1+pm1)·(1+corr·G) - 1
	pm1   float32 // exp(r)-1
	scale float32 // 2^n
}

// newGeluTail computes the tail quantities of x. recoverLo is false only
// in the negative control of the tests, which drops the rounding error of
// -x²/2 that keeps exp(-x²/2) relatively accurate in the tail.
func newGeluTail(x float32, recoverLo bool) (g geluTail) {
	g.xu = min(x, geluClamp)
	g.xc = max(g.xu, -geluClamp) // NaN stays NaN
	a := float32(math.Abs(float64(g.xc)))
	d := geluFMA(a, geluK, 1)
	g.t = 1 / d
	dlo := geluFMA(a, geluK, 1-d)
	eps := geluFMA(-d, g.t, 1)
	corr := geluFMA(-dlo, g.t, eps)
	cG := corr * geluPoly(geluG[:], g.t)
	g.r = geluPoly(geluR[:], g.t)
	ma := a * -0.5
	whi := ma * a
	wlo := geluFMA(ma, a, -whi)
	if !recoverLo {
		wlo = 0
	}
	f := geluFMA(whi, geluLog2e, geluMagic)
	nf := f - geluMagic
	r := geluFMA(nf, -geluLn2Hi, whi) + geluFMA(nf, -geluLn2Lo, wlo)
	g.pm1 = geluPoly(geluExp[:], r) * r
	g.m = geluFMA(g.pm1, cG, g.pm1+cG)
	g.scale = math.Float32frombits(math.Float32bits(f)<<23 + 127<<23)
	return g
}

// gelu1 is GELU of one element.
func gelu1(x float32) float32 { return geluOf(x, true) }

// geluOf is gelu1, with the option of the negative control (newGeluTail).
func geluOf(x float32, recoverLo bool) float32 {
	g := newGeluTail(x, recoverLo)
	// P = xu·Φ(-|x|), with xu·t and its rounding error.
	X := g.xu * g.t
	xe := geluFMA(g.xu, g.t, -X)
	sm := geluFMA(X, g.m, xe)
	p := geluFMA(X, g.r, sm*g.r) * g.scale
	y := p
	if !(x < 0) {
		y = x - p
	}
	hx := x * 0.5
	if s := hx * x; s < geluErfBound*geluErfBound/2 {
		y = geluFMA(s, geluPoly(geluErf[:], s), hx)
	}
	return y
}

// geluSlope1 is GELU'(x) of one element: with D = Φ(-|x|) - |x|·φ(x) =
// (q·(1+m) - |xc|/√(2π)·(1+pm1))·2^n, GELU'(x) = D for x < 0 and 1 - D
// otherwise.
func geluSlope1(x float32) float32 {
	g := newGeluTail(x, true)
	q := g.t * g.r
	u := geluFMA(q, g.m, q)
	xa := float32(math.Abs(float64(g.xc))) * geluInvSqrt2Pi
	v := geluFMA(xa, g.pm1, xa)
	d := (u - v) * g.scale
	if x < 0 {
		return d
	}
	return 1 - d
}
