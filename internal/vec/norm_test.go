package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// normLengths are the row lengths the tests run: empty, around one group
// of 4, one vector of 8, one and two 16-lane chunks, the model's C = 128,
// and odd lengths with every kind of tail.
var normLengths = []int{0, 1, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 513}

// normKinds are the kinds of row data: noise of one random scale, noise
// whose elements span 12 decades (so that float64 sums of float32s round,
// and their order shows), a large common offset (1000 + small noise, where
// Σx² - n·mean² cancels badly), and noise with special values (NaN, ±Inf,
// ±0, subnormals).
var normKinds = []string{"noise", "wide", "offset", "special"}

// normGuard is the number of sentinel elements past every output slice,
// to catch a kernel writing beyond its length.
const normGuard = 9

// normRand returns the test's seeded generator.
func normRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d)) }

// normData returns a row of n floats of the given kind.
func normData(r *rand.Rand, kind string, n int) []float32 {
	s := make([]float32, n)
	scale := math.Pow(10, float64(r.IntN(5)-2))
	for i := range s {
		switch kind {
		case "wide":
			s[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(13)-6)))
		case "offset":
			s[i] = float32(1000 + 0.01*r.NormFloat64())
		case "special":
			switch r.IntN(12) {
			case 0:
				s[i] = float32(math.NaN())
			case 1:
				s[i] = float32(math.Inf(1 - 2*r.IntN(2)))
			case 2:
				s[i] = float32(math.Copysign(0, -1))
			case 3:
				s[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal or ±0
			default:
				s[i] = float32(scale * r.NormFloat64())
			}
		default:
			s[i] = float32(scale * r.NormFloat64())
		}
	}
	return s
}

// normGuarded returns a copy of s followed by normGuard sentinels, sliced
// to len(s).
func normGuarded[F float32 | float64](s []F) []F {
	g := make([]F, len(s), len(s)+normGuard)
	copy(g, s)
	for range normGuard {
		g = append(g, -12345.5)
	}
	return g[:len(s)]
}

// checkGuard fails t if a sentinel past len(s) changed.
func checkGuard[F float32 | float64](t *testing.T, name string, s []F) {
	t.Helper()
	for i, v := range s[len(s):cap(s)] {
		if v != -12345.5 {
			t.Errorf("%s: element %d past the end = %v, want the sentinel untouched", name, len(s)+i, v)
		}
	}
}

// same32 and same64 report bitwise equality, treating any two NaNs as
// equal (the payload may depend on operand order).
func same32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

func same64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// withFallback runs f with the assembly kernels switched off.
func withFallback(f func()) {
	old := normAsm
	normAsm = false
	defer func() { normAsm = old }()
	f()
}

// normCase is one row of test data with its statistics.
type normCase struct {
	name        string
	x, w, b, dy []float32
	mean, rstd  float64 // of x's finite values (the special rows keep their NaNs local)
	sg, sgx     float64 // LNGradXRow's means of g and g·xhat: random, of their usual size
	accInit     []float64
	special     bool
}

// normCases returns every kind × length with reproducible data.
func normCases() []normCase {
	var cs []normCase
	for ki, kind := range normKinds {
		for _, n := range normLengths {
			r := normRand(uint64(1000*ki + n))
			c := normCase{name: fmt.Sprintf("%s/n=%d", kind, n), special: kind == "special"}
			c.x = normData(r, kind, n)
			c.w = normData(r, "noise", n)
			c.b = normData(r, "noise", n)
			c.dy = normData(r, kind, n)
			c.accInit = make([]float64, n)
			for i := range c.accInit {
				c.accInit[i] = r.NormFloat64()
			}
			var s, ss, k float64
			for _, v := range c.x {
				if a := float64(v); !math.IsNaN(a) && !math.IsInf(a, 0) {
					s, ss, k = s+a, ss+a*a, k+1
				}
			}
			if k > 0 {
				c.mean = s / k
				c.rstd = 1 / math.Sqrt(max(ss/k-c.mean*c.mean, 0)+1e-5)
			}
			c.sg, c.sgx = 0.1*r.NormFloat64(), 0.1*r.NormFloat64()
			cs = append(cs, c)
		}
	}
	return cs
}

// checkSum fails t unless got, a sum of the n terms f(i), is within 1e-12
// of their compensated (Neumaier) sum relative to Σ|f(i)|. With a NaN or
// an infinity among the terms, got must equal their sequential sum (NaN
// for NaN, the same infinity for infinities of one sign).
func checkSum(t *testing.T, name string, got float64, n int, f func(i int) float64) {
	t.Helper()
	var seq, sum, comp, abs float64
	for i := range n {
		v := f(i)
		seq += v
		s := sum + v
		if math.Abs(sum) >= math.Abs(v) {
			comp += (sum - s) + v
		} else {
			comp += (v - s) + sum
		}
		sum = s
		abs += math.Abs(v)
	}
	if math.IsNaN(seq) || math.IsInf(seq, 0) {
		if !same64(got, seq) {
			t.Errorf("%s = %v, want %v", name, got, seq)
		}
		return
	}
	want := sum + comp
	if d := math.Abs(got - want); d > 1e-12*abs {
		t.Errorf("%s = %v, want %v (±%g), off by %g", name, got, want, 1e-12*abs, d)
	}
}

func TestMoments(t *testing.T) {
	for _, c := range normCases() {
		t.Run(c.name, func(t *testing.T) {
			s, ss := Moments(c.x)
			var gs, gss float64
			withFallback(func() { gs, gss = Moments(c.x) })
			if !same64(s, gs) || !same64(ss, gss) {
				t.Errorf("Moments = %v, %v; fallback %v, %v, want bitwise equal", s, ss, gs, gss)
			}
			x := func(i int) float64 { return float64(c.x[i]) }
			checkSum(t, "Σx", gs, len(c.x), x)
			checkSum(t, "Σx²", gss, len(c.x), func(i int) float64 { return x(i) * x(i) })
		})
	}
}

func TestLNGradSums(t *testing.T) {
	for _, c := range normCases() {
		t.Run(c.name, func(t *testing.T) {
			a, b, d, e := LNGradSums(c.x, c.w, c.dy)
			var ga, gb, gd, ge float64
			withFallback(func() { ga, gb, gd, ge = LNGradSums(c.x, c.w, c.dy) })
			if !same64(a, ga) || !same64(b, gb) || !same64(d, gd) || !same64(e, ge) {
				t.Errorf("LNGradSums = %v, %v, %v, %v; fallback %v, %v, %v, %v, want bitwise equal", a, b, d, e, ga, gb, gd, ge)
			}
			x := func(i int) float64 { return float64(c.x[i]) }
			g := func(i int) float64 { return float64(c.dy[i]) * float64(c.w[i]) }
			n := len(c.x)
			checkSum(t, "Σx", ga, n, x)
			checkSum(t, "Σx²", gb, n, func(i int) float64 { return x(i) * x(i) })
			checkSum(t, "Σg", gd, n, g)
			checkSum(t, "Σg·x", ge, n, func(i int) float64 { return g(i) * x(i) })
		})
	}
}

// The references below are the per-element expressions of
// models/ops_layernorm.go, with explicit conversions pinning each rounding
// (as GOAMD64=v1 compiles them; v3 could fuse a multiply-add).

func refLNRow(y, x, w, b []float32, mean, rstd float64) {
	for c, v := range x {
		y[c] = float32(float32((float64(v)-mean)*rstd)*w[c]) + b[c]
	}
}

func refLNGradXRow(dx, x, w, dy []float32, mean, rstd, sg, sgx float64) {
	for c, wv := range w {
		g := float64(dy[c]) * float64(wv)
		xhat := (float64(x[c]) - mean) * rstd
		dx[c] = float32(rstd * (g - sg - float64(xhat*sgx)))
	}
}

func refLNGradWAccum(acc []float64, x, dy []float32, mean, rstd float64) {
	for c, v := range x {
		acc[c] += float64(float64(dy[c]) * (float64(v) - mean) * rstd)
	}
}

// elementCheck compares got with want bitwise and, for special rows,
// checks that NaN inputs gave NaN outputs.
func elementCheck[F float32 | float64](t *testing.T, name string, got, want []F, nanIn []bool) {
	t.Helper()
	bad := 0
	for i := range want {
		ok := same64(float64(got[i]), float64(want[i]))
		if _, f32 := any(got[i]).(float32); f32 {
			ok = same32(float32(got[i]), float32(want[i]))
		}
		if nanIn[i] && got[i] == got[i] {
			t.Errorf("%s[%d] = %v from a NaN input, want NaN", name, i, got[i])
		}
		if !ok && bad < 5 {
			bad++
			t.Errorf("%s[%d] = %v, want %v bitwise", name, i, got[i], want[i])
		}
	}
}

// nanAt marks the positions where any of the rows holds a NaN.
func nanAt(n int, rows ...[]float32) []bool {
	m := make([]bool, n)
	for _, r := range rows {
		for i := range m {
			m[i] = m[i] || r[i] != r[i]
		}
	}
	return m
}

func TestLNRow(t *testing.T) {
	for _, c := range normCases() {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.x)
			want := make([]float32, n)
			refLNRow(want, c.x, c.w, c.b, c.mean, c.rstd)
			nan := nanAt(n, c.x, c.w, c.b)
			for _, path := range []string{"asm", "fallback"} {
				run := func(f func()) { f() }
				if path == "fallback" {
					run = withFallback
				}
				y := normGuarded(make([]float32, n))
				run(func() { LNRow(y, c.x, c.w, c.b, c.mean, c.rstd) })
				elementCheck(t, path+" y", y, want, nan)
				checkGuard(t, path+" y", y)
				xa := normGuarded(c.x) // y aliases x
				run(func() { LNRow(xa, xa, c.w, c.b, c.mean, c.rstd) })
				elementCheck(t, path+" in place y", xa, want, nan)
				checkGuard(t, path+" in place y", xa)
			}
		})
	}
}

func TestLNGradXRow(t *testing.T) {
	for _, c := range normCases() {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.x)
			want := make([]float32, n)
			refLNGradXRow(want, c.x, c.w, c.dy, c.mean, c.rstd, c.sg, c.sgx)
			nan := nanAt(n, c.x, c.w, c.dy)
			for _, path := range []string{"asm", "fallback"} {
				run := func(f func()) { f() }
				if path == "fallback" {
					run = withFallback
				}
				dx := normGuarded(make([]float32, n))
				run(func() { LNGradXRow(dx, c.x, c.w, c.dy, c.mean, c.rstd, c.sg, c.sgx) })
				elementCheck(t, path+" dx", dx, want, nan)
				checkGuard(t, path+" dx", dx)
				xa := normGuarded(c.x) // dx aliases x
				run(func() { LNGradXRow(xa, xa, c.w, c.dy, c.mean, c.rstd, c.sg, c.sgx) })
				elementCheck(t, path+" dx=x", xa, want, nan)
				dya := normGuarded(c.dy) // dx aliases dy
				run(func() { LNGradXRow(dya, c.x, c.w, dya, c.mean, c.rstd, c.sg, c.sgx) })
				elementCheck(t, path+" dx=dy", dya, want, nan)
				checkGuard(t, path+" dx=dy", dya)
			}
		})
	}
}

func TestLNGradWAccum(t *testing.T) {
	for _, c := range normCases() {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.x)
			want := append([]float64(nil), c.accInit...)
			refLNGradWAccum(want, c.x, c.dy, c.mean, c.rstd)
			nan := nanAt(n, c.x, c.dy)
			for _, path := range []string{"asm", "fallback"} {
				run := func(f func()) { f() }
				if path == "fallback" {
					run = withFallback
				}
				acc := normGuarded(c.accInit)
				run(func() { LNGradWAccum(acc, c.x, c.dy, c.mean, c.rstd) })
				elementCheck(t, path+" acc", acc, want, nan)
				checkGuard(t, path+" acc", acc)
			}
		})
	}
}

// TestNormNegativeControls checks that the bitwise comparisons above are
// sensitive: a fused multiply-add in LNRow or LNGradWAccum, an xhat
// rounded to float32 in LNGradXRow, or a sequential sum in place of the
// lane tree changes some result on the test data. (A fused multiply-add in
// LNGradXRow moves its float64 result by about 1e-16 relative, which the
// final rounding to float32 hides on all of this data: that variant is
// only logged.)
func TestNormNegativeControls(t *testing.T) {
	var rowDiff, wDiff, xDiff, xFMADiff, sumDiff, total int
	for _, c := range normCases() {
		if c.special {
			continue
		}
		n := len(c.x)
		total += n
		y, fy := make([]float32, n), make([]float32, n)
		LNRow(y, c.x, c.w, c.b, c.mean, c.rstd)
		for i, v := range c.x { // the float32 product and sum fused
			xhat := float32((float64(v) - c.mean) * c.rstd)
			fy[i] = float32(math.FMA(float64(xhat), float64(c.w[i]), float64(c.b[i])))
		}
		acc, facc := append([]float64(nil), c.accInit...), append([]float64(nil), c.accInit...)
		LNGradWAccum(acc, c.x, c.dy, c.mean, c.rstd)
		for i, v := range c.x { // (dy·(x-mean))·rstd + acc fused
			facc[i] = math.FMA(float64(c.dy[i])*(float64(v)-c.mean), c.rstd, facc[i])
		}
		dx, fdx, rdx := make([]float32, n), make([]float32, n), make([]float32, n)
		LNGradXRow(dx, c.x, c.w, c.dy, c.mean, c.rstd, c.sg, c.sgx)
		for i, v := range c.x {
			g := float64(c.dy[i]) * float64(c.w[i])
			xhat := (float64(v) - c.mean) * c.rstd
			fdx[i] = float32(c.rstd * math.FMA(-xhat, c.sgx, g-c.sg)) // product fused
			xhat = float64(float32(xhat))                             // xhat rounded to float32
			rdx[i] = float32(c.rstd * (g - c.sg - float64(xhat*c.sgx)))
		}
		for i := range n {
			rowDiff += b2i(!same32(y[i], fy[i]))
			wDiff += b2i(!same64(acc[i], facc[i]))
			xDiff += b2i(!same32(dx[i], rdx[i]))
			xFMADiff += b2i(!same32(dx[i], fdx[i]))
		}
		// Sequential sums in place of the lane tree. (Σx of float32s is
		// often exact in float64 whatever the order; Σx² and Σg·x are not.)
		_, ss := Moments(c.x)
		_, _, _, sgx := LNGradSums(c.x, c.w, c.dy)
		var seqSS, seqSGX float64
		for i, v := range c.x {
			a, g := float64(v), float64(c.dy[i])*float64(c.w[i])
			seqSS += float64(a * a)
			seqSGX += float64(g * a)
		}
		sumDiff += b2i(!same64(ss, seqSS)) + b2i(!same64(sgx, seqSGX))
	}
	t.Logf("of %d elements, differing from a variant: LNRow fused %d, LNGradWAccum fused %d, LNGradXRow float32 xhat %d, LNGradXRow fused %d; sums differing from a sequential sum: %d",
		total, rowDiff, wDiff, xDiff, xFMADiff, sumDiff)
	for _, ctl := range []struct {
		name string
		diff int
	}{
		{"LNRow vs its fused variant", rowDiff},
		{"LNGradWAccum vs its fused variant", wDiff},
		{"LNGradXRow vs a float32-xhat variant", xDiff},
		{"Moments and LNGradSums vs sequential sums", sumDiff},
	} {
		if ctl.diff == 0 {
			t.Errorf("%s: equal on all test data, want some difference", ctl.name)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestNormPanics(t *testing.T) {
	short, long := make([]float32, 3), make([]float32, 4)
	tests := []struct {
		name string
		f    func()
	}{
		{"LNGradSums w", func() { LNGradSums(long, short, long) }},
		{"LNGradSums dy", func() { LNGradSums(long, long, short) }},
		{"LNRow x", func() { LNRow(long, short, long, long, 0, 1) }},
		{"LNRow b", func() { LNRow(long, long, long, short, 0, 1) }},
		{"LNGradXRow dy", func() { LNGradXRow(long, long, long, short, 0, 1, 0, 0) }},
		{"LNGradWAccum x", func() { LNGradWAccum(make([]float64, 4), short, long, 0, 1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with a short input did not panic", tc.name)
				}
			}()
			tc.f()
		})
	}
}

// FuzzNormAsmVsGo checks that the AVX2 kernels and the Go fallbacks agree
// bitwise (NaNs as NaNs) on arbitrary rows: the fuzzer's bytes are the
// float32 bit patterns of x, w, b and dy interleaved, and the scalars.
func FuzzNormAsmVsGo(f *testing.F) {
	f.Add([]byte{}, 0.0, 1.0, 0.0, 0.0)
	seed := make([]byte, 16*37)
	r := normRand(99)
	for i := range seed {
		seed[i] = byte(r.Uint32())
	}
	f.Add(seed, 0.25, 3.0, -0.5, 0.125)
	f.Fuzz(func(t *testing.T, data []byte, mean, rstd, sg, sgx float64) {
		n := len(data) / 16
		x, w, b, dy := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range n {
			u := func(k int) float32 {
				o := 16*i + 4*k
				return math.Float32frombits(uint32(data[o]) | uint32(data[o+1])<<8 | uint32(data[o+2])<<16 | uint32(data[o+3])<<24)
			}
			x[i], w[i], b[i], dy[i] = u(0), u(1), u(2), u(3)
		}
		type result struct {
			s, ss, sx, sxx, sg, sgx float64
			y, dx                   []float32
			acc                     []float64
		}
		run := func() result {
			var o result
			o.s, o.ss = Moments(x)
			o.sx, o.sxx, o.sg, o.sgx = LNGradSums(x, w, dy)
			o.y, o.dx, o.acc = make([]float32, n), make([]float32, n), make([]float64, n)
			LNRow(o.y, x, w, b, mean, rstd)
			LNGradXRow(o.dx, x, w, dy, mean, rstd, sg, sgx)
			for i := range o.acc {
				o.acc[i] = float64(b[i])
			}
			LNGradWAccum(o.acc, x, dy, mean, rstd)
			return o
		}
		got := run()
		var want result
		withFallback(func() { want = run() })
		for i, p := range [][2]float64{{got.s, want.s}, {got.ss, want.ss}, {got.sx, want.sx}, {got.sxx, want.sxx}, {got.sg, want.sg}, {got.sgx, want.sgx}} {
			if !same64(p[0], p[1]) {
				t.Errorf("sum %d (n = %d) = %v, fallback %v", i, n, p[0], p[1])
			}
		}
		for i := range n {
			if !same32(got.y[i], want.y[i]) || !same32(got.dx[i], want.dx[i]) || !same64(got.acc[i], want.acc[i]) {
				t.Errorf("element %d of %d: y, dx, acc = %v, %v, %v; fallback %v, %v, %v", i, n, got.y[i], got.dx[i], got.acc[i], want.y[i], want.dx[i], want.acc[i])
			}
		}
	})
}
