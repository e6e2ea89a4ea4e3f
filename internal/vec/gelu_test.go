package vec

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"testing"
)

// The accuracy bounds of GELU and GELUGrad against float64 math.Erfc and
// math.Exp: forward within geluMaxULP ulp of y64 wherever |y64| >=
// geluTiny, the slope within geluMaxSlopeErr absolutely.
const (
	geluMaxULP      = 4
	geluMaxSlopeErr = 4 * 0x1p-24
	geluTiny        = 1e-30
)

// geluRef64 is the float64 reference: y = x·Φ(x) and the slope
// Φ(x) + x·φ(x).
func geluRef64(x float32) (y, slope float64) {
	f := float64(x)
	cdf := 0.5 * math.Erfc(-f/math.Sqrt2)
	return f * cdf, cdf + f*math.Exp(-0.5*f*f)*geluInvSqrt2Pi
}

// ulp32 is the spacing of the float32 values at |v|.
func ulp32(v float64) float64 {
	v = math.Abs(v)
	if v < 0x1p-126 {
		return 0x1p-149
	}
	_, e := math.Frexp(v) // v = frac·2^e, frac in [0.5, 1)
	return math.Ldexp(1, e-24)
}

// geluTestPoints returns the accuracy sweep: every 1024th float32 bit
// pattern of each sign up to 13.5 (dense near 0), a uniform grid of 10^6
// points over [-13, 13] (dense in the tails), and 10^5 seeded random
// points in [-14, 14]. With -short, every 8192nd bit pattern and a grid
// of 10^5 (about a ninth of the points: the arm64 tests under emulation).
func geluTestPoints() []float32 {
	stride, n := uint32(1024), 1_000_000
	if testing.Short() {
		stride, n = 8192, 100_000
	}
	var xs []float32
	for b := uint32(0); b <= math.Float32bits(13.5); b += stride {
		v := math.Float32frombits(b)
		xs = append(xs, v, -v)
	}
	for i := range n {
		xs = append(xs, float32(-13+26*float64(i)/float64(n-1)))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		xs = append(xs, float32(28*rng.Float64()-14))
	}
	return xs
}

// geluErrors returns the worst forward error in ulp of y64 (|y64| >=
// geluTiny) and the x where it is, over x with y = f(x).
func geluWorstULP(x, y []float32) (worst float64, at float32) {
	for i, v := range x {
		y64, _ := geluRef64(v)
		if math.Abs(y64) < geluTiny {
			continue
		}
		if e := math.Abs(float64(y[i])-y64) / ulp32(y64); e > worst || e != e {
			worst, at = e, v
		}
	}
	return worst, at
}

var geluExhaustive = flag.Bool("gelu.exhaustive", false, "TestGELUExhaustive: check every float32 with |x| <= 14 (minutes)")

// TestGELUExhaustive is TestGELUAccuracy on every float32 with |x| <= 14
// (beyond, the clamp makes the result exact), for every implementation;
// it runs only with -gelu.exhaustive.
func TestGELUExhaustive(t *testing.T) {
	if !*geluExhaustive {
		t.Skip("run with -gelu.exhaustive")
	}
	for _, im := range geluImpls() {
		t.Run(im.name, func(t *testing.T) { geluExhaustive1(t, im) })
	}
}

// geluExhaustive1 is TestGELUExhaustive of one implementation.
func geluExhaustive1(t *testing.T, im geluImpl) {
	const chunk = 1 << 20
	last := math.Float32bits(14)
	type result struct {
		worst, worstS float64
		at, atS       float32
	}
	chunks := make(chan uint32)
	results := make(chan result)
	workers := runtime.GOMAXPROCS(0)
	for range workers {
		go func() {
			var r result
			x, y, s := make([]float32, 2*chunk), make([]float32, 2*chunk), make([]float32, 2*chunk)
			ones := make([]float32, 2*chunk)
			for i := range ones {
				ones[i] = 1
			}
			for lo := range chunks {
				x = x[:0]
				for b := lo; b < lo+chunk && b <= last; b++ {
					v := math.Float32frombits(b)
					x = append(x, v, -v)
				}
				y, s := y[:len(x)], s[:len(x)]
				im.fwd(y, x)
				im.grad(s, x, ones[:len(x)])
				if w, at := geluWorstULP(x, y); w > r.worst || w != w {
					r.worst, r.at = w, at
				}
				for i, v := range x {
					_, s64 := geluRef64(v)
					if e := math.Abs(float64(s[i]) - s64); e > r.worstS || e != e {
						r.worstS, r.atS = e, v
					}
				}
			}
			results <- r
		}()
	}
	for lo := uint32(0); lo <= last; lo += chunk {
		chunks <- lo
	}
	close(chunks)
	var r result
	for range workers {
		w := <-results
		if w.worst > r.worst || w.worst != w.worst {
			r.worst, r.at = w.worst, w.at
		}
		if w.worstS > r.worstS || w.worstS != w.worstS {
			r.worstS, r.atS = w.worstS, w.atS
		}
	}
	t.Logf("%s, every float32 with |x| <= 14: worst forward error %.3f ulp (at x = %g), worst slope error %.3f·2^-24 (at x = %g)",
		im.name, r.worst, r.at, r.worstS/0x1p-24, r.atS)
	if !(r.worst <= geluMaxULP) || !(r.worstS <= geluMaxSlopeErr) {
		t.Errorf("worst errors %.3f ulp, %.3g slope; want <= %d ulp, %.3g", r.worst, r.worstS, geluMaxULP, geluMaxSlopeErr)
	}
}

func TestGELUAccuracy(t *testing.T) {
	x := geluTestPoints()
	ones := make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	y, slope := make([]float32, len(x)), make([]float32, len(x))
	for _, im := range geluImpls() {
		t.Run(im.name, func(t *testing.T) {
			im.fwd(y, x)
			im.grad(slope, x, ones) // dy = 1: dx is the slope
			worst, at := geluWorstULP(x, y)
			var worstS float64
			var atS float32
			var tinyBad int
			for i, v := range x {
				y64, s64 := geluRef64(v)
				if math.Abs(y64) < geluTiny && math.Abs(float64(y[i])-y64) > geluTiny {
					tinyBad++
				}
				if e := math.Abs(float64(slope[i]) - s64); e > worstS || e != e {
					worstS, atS = e, v
				}
			}
			t.Logf("%d points: worst forward error %.3f ulp (at x = %g), worst slope error %.3g = %.3f·2^-24 (at x = %g)",
				len(x), worst, at, worstS, worstS/0x1p-24, atS)
			if !(worst <= geluMaxULP) {
				t.Errorf("GELU(%g): error %.3f ulp, want <= %d", at, worst, geluMaxULP)
			}
			if !(worstS <= geluMaxSlopeErr) {
				t.Errorf("GELUGrad slope(%g): error %.3g, want <= %.3g", atS, worstS, geluMaxSlopeErr)
			}
			if tinyBad > 0 {
				t.Errorf("GELU: %d points with |y64| < %g off by more than %g", tinyBad, geluTiny, geluTiny)
			}
		})
	}
}

// TestGELUGradRoundsOnce checks dx = dy·slope with one rounding: the
// slope (from dy = 1) times dy in float32 is bitwise dx.
func TestGELUGradRoundsOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 4099
	x, dy, ones := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
		dy[i] = float32(rng.NormFloat64())
		ones[i] = 1
	}
	for _, im := range geluImpls() {
		t.Run(im.name, func(t *testing.T) {
			slope, dx := make([]float32, n), make([]float32, n)
			im.grad(slope, x, ones)
			im.grad(dx, x, dy)
			for i := range x {
				if want := dy[i] * slope[i]; dx[i] != want {
					t.Fatalf("GELUGrad(x=%g, dy=%g) = %g, want dy·slope = %g", x[i], dy[i], dx[i], want)
				}
			}
		})
	}
}

// geluSpecials are inputs at the edges: zeros, infinities, NaN, huge and
// tiny values, the clamp and the branch boundaries.
var geluSpecials = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	math.MaxFloat32, -math.MaxFloat32, 1e30, -1e30, 0x1p-149, -0x1p-149, 0x1p-126, -0x1p-126,
	geluClamp, -geluClamp, 13.2, -13.2, 14, -14, geluErfBound, -geluErfBound, 1, -1,
}

func TestGELUSpecialValues(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		x, y, slope float64 // y == 0 matches ±0; NaN matches NaN
	}{
		{0, 0, 0.5},
		{math.Copysign(0, -1), 0, 0.5},
		{math.Inf(1), math.Inf(1), 1},
		{math.Inf(-1), nan, 0},
		{nan, nan, nan},
		{math.MaxFloat32, math.MaxFloat32, 1},
		{-math.MaxFloat32, 0, 0},
		{1e30, 1e30, 1},
		{-1e30, 0, 0},
		{20, 20, 1},
		{-20, 0, 0},
		{-14, 0, 0},
	}
	for _, im := range geluImpls() {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/%g", im.name, tc.x), func(t *testing.T) {
				x := []float32{float32(tc.x)}
				y, dx := make([]float32, 1), make([]float32, 1)
				im.fwd(y, x)
				im.grad(dx, x, []float32{1})
				same := func(got float32, want float64) bool {
					return got == float32(want) || (got != got && want != want)
				}
				if !same(y[0], tc.y) {
					t.Errorf("GELU(%g) = %g, want %g", tc.x, y[0], tc.y)
				}
				if !same(dx[0], tc.slope) {
					t.Errorf("GELUGrad(%g, dy=1) = %g, want %g", tc.x, dx[0], tc.slope)
				}
			})
		}
	}
}

// geluInput returns n seeded values: normal with σ = 4, and every 7th one
// of geluSpecials.
func geluInput(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 5))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(4 * rng.NormFloat64())
		if i%7 == 3 {
			x[i] = geluSpecials[(i/7)%len(geluSpecials)]
		}
	}
	return x
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// geluGuard is the number of sentinel elements past every output, to
// catch a kernel writing beyond its slice.
const geluGuard = 9

func TestGELUAliasing(t *testing.T) {
	var lengths []int
	for n := range 34 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1000)
	const sentinel = -12345
	out := func(n int, from []float32) []float32 { // n elements (a copy of from), then geluGuard sentinels
		s := make([]float32, n+geluGuard)
		for i := range s {
			s[i] = sentinel
		}
		copy(s, from)
		return s[:n]
	}
	guarded := func(s []float32) bool {
		for _, v := range s[len(s) : len(s)+geluGuard] {
			if v != sentinel {
				return false
			}
		}
		return true
	}
	for _, im := range geluImpls() {
		for _, n := range lengths {
			t.Run(fmt.Sprintf("%s/%d", im.name, n), func(t *testing.T) {
				x, dy := geluInput(n, uint64(n)), geluInput(n, uint64(n)+100)
				y, dx := out(n, nil), out(n, nil)
				im.fwd(y, x)
				im.grad(dx, x, dy)
				if !guarded(y) || !guarded(dx) {
					t.Fatalf("n=%d: a kernel wrote past the output", n)
				}
				for i := range x { // the tail goes through the same code
					if want := gelu1(x[i]); im.name == "go" && math.Float32bits(y[i]) != math.Float32bits(want) {
						t.Fatalf("n=%d: GELU(%g) = %g, want gelu1 = %g", n, x[i], y[i], want)
					}
				}
				inPlace := out(n, x)
				im.fwd(inPlace, inPlace)
				if !sameBits(inPlace, y) || !guarded(inPlace) {
					t.Errorf("n=%d: GELU(x, x) = %v, want %v", n, inPlace, y)
				}
				dxx := out(n, x)
				im.grad(dxx, dxx, dy)
				if !sameBits(dxx, dx) || !guarded(dxx) {
					t.Errorf("n=%d: GELUGrad(x, x, dy) = %v, want %v", n, dxx, dx)
				}
				dxdy := out(n, dy)
				im.grad(dxdy, x, dxdy)
				if !sameBits(dxdy, dx) || !guarded(dxdy) {
					t.Errorf("n=%d: GELUGrad(dy, x, dy) = %v, want %v", n, dxdy, dx)
				}
			})
		}
	}
}

// TestGELUSplit checks that every element is computed by the same code
// whatever the slice around it: a slice done in two pieces, cut anywhere,
// is bitwise the slice done at once.
func TestGELUSplit(t *testing.T) {
	const n = 61
	x, dy := geluInput(n, 7), geluInput(n, 8)
	for _, im := range geluImpls() {
		t.Run(im.name, func(t *testing.T) {
			y, dx := make([]float32, n), make([]float32, n)
			im.fwd(y, x)
			im.grad(dx, x, dy)
			for cut := 0; cut <= n; cut++ {
				y2, dx2 := make([]float32, n), make([]float32, n)
				im.fwd(y2[:cut], x[:cut])
				im.fwd(y2[cut:], x[cut:])
				im.grad(dx2[:cut], x[:cut], dy[:cut])
				im.grad(dx2[cut:], x[cut:], dy[cut:])
				if !sameBits(y2, y) {
					t.Errorf("GELU cut at %d differs from GELU at once", cut)
				}
				if !sameBits(dx2, dx) {
					t.Errorf("GELUGrad cut at %d differs from GELUGrad at once", cut)
				}
			}
		})
	}
}

// TestGELUImplsAgree checks each kernel against the next one down, and
// the last assembly kernel against the pure-Go loop: the same algorithm
// and constants, so at most 2 ulp from Go (the emulated FMAs of the
// fallback may round twice, and with GOAMD64=v3 the compiler fuses some
// of its other products; with the default GOAMD64=v1 they agree bitwise
// on the sweep); a drifted constant would show here first. Two assembly
// kernels (AVX-512 and AVX2) make the same operations lane by lane and
// must agree bitwise.
func TestGELUImplsAgree(t *testing.T) {
	ims := geluImpls()
	if len(ims) < 2 {
		t.Skip("only the pure-Go implementation on this CPU")
	}
	x := geluTestPoints()
	ones := make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	for p := 0; p+1 < len(ims); p++ {
		a, b := ims[p], ims[p+1]
		ya, yb := make([]float32, len(x)), make([]float32, len(x))
		sa, sb := make([]float32, len(x)), make([]float32, len(x))
		a.fwd(ya, x)
		b.fwd(yb, x)
		a.grad(sa, x, ones)
		b.grad(sb, x, ones)
		var worst, worstS float64
		var differ int
		for i := range x {
			if math.Float32bits(ya[i]) != math.Float32bits(yb[i]) || math.Float32bits(sa[i]) != math.Float32bits(sb[i]) {
				differ++
			}
			if ya[i] != 0 || yb[i] != 0 {
				worst = max(worst, math.Abs(float64(ya[i])-float64(yb[i]))/ulp32(float64(yb[i])))
			}
			worstS = max(worstS, math.Abs(float64(sa[i])-float64(sb[i]))/0x1p-24)
		}
		t.Logf("%s vs %s: %d of %d points differ, by at most %.3g ulp (forward), %.3g·2^-24 (slope)",
			a.name, b.name, differ, len(x), worst, worstS)
		switch {
		case b.name != "go" && differ > 0:
			t.Errorf("%s and %s differ on %d points; two assembly kernels must agree bitwise", a.name, b.name, differ)
		case worst > 2 || worstS > 2:
			t.Errorf("%s and %s differ by %.3g ulp forward, %.3g·2^-24 slope; want <= 2", a.name, b.name, worst, worstS)
		}
	}
}

// TestGELUNegativeControl checks that the accuracy test can fail: in the
// lower tail, the forward error exceeds the bound both without the FMA
// that recovers the rounding error of -x²/2 and with Φ = (1+erf(x/√2))/2,
// which cancels there.
func TestGELUNegativeControl(t *testing.T) {
	var x []float32
	for i := range 100_000 {
		x = append(x, float32(-11+7*float64(i)/100_000)) // [-11, -4)
	}
	y := make([]float32, len(x))
	tests := []struct {
		name string
		f    func(float32) float32
	}{
		{"without-fma-lo", func(v float32) float32 { return geluOf(v, false) }},
		{"one-plus-erf", func(v float32) float32 {
			e := float32(math.Erf(float64(v) / math.Sqrt2)) // erf correctly rounded to float32
			return 0.5 * v * (1 + e)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, v := range x {
				y[i] = tc.f(v)
			}
			worst, at := geluWorstULP(x, y)
			t.Logf("worst forward error %.3g ulp at x = %g", worst, at)
			if worst <= geluMaxULP {
				t.Errorf("%s: worst error %.3g ulp, want > %d (the control must fail the bound)", tc.name, worst, geluMaxULP)
			}
		})
	}
	good := make([]float32, len(x))
	geluGo(good, x)
	if worst, at := geluWorstULP(x, good); worst > geluMaxULP {
		t.Errorf("GELU(%g): error %.3g ulp on the control's points, want <= %d", at, worst, geluMaxULP)
	}
}

func TestGELUPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"GELU short y", func() { GELU(make([]float32, 2), make([]float32, 3)) }},
		{"GELU long y", func() { GELU(make([]float32, 4), make([]float32, 3)) }},
		{"GELUGrad short dx", func() { GELUGrad(make([]float32, 2), make([]float32, 3), make([]float32, 3)) }},
		{"GELUGrad short dy", func() { GELUGrad(make([]float32, 3), make([]float32, 3), make([]float32, 2)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		})
	}
}

// TestGELUAsmAVX2Only checks that the generated kernels use only the 16
// vector registers of AVX2 (avo's allocator would use Y16-Y31, which
// fault without AVX-512; the generator checks this too).
func TestGELUAsmAVX2Only(t *testing.T) {
	src, err := os.ReadFile("gelu_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`).Find(src); m != nil {
		t.Errorf("gelu_amd64.s uses %s, an AVX-512 register", m)
	}
}
