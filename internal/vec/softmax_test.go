package vec

import (
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// smImpls are the implementations the tests run through the public API:
// this build's kernels (when this CPU has them) and the fallbacks.
func smImpls() []string {
	return append(smAsmImpls(), "go")
}

// smAsmImpls are this build's kernels this CPU runs: on amd64 with
// AVX-512, "avx512" and the AVX2 ones.
func smAsmImpls() []string {
	var impls []string
	if smHasZ {
		impls = append(impls, "avx512")
	}
	if smHasAsm {
		impls = append(impls, asmName)
	}
	return impls
}

// smHasAsm and smHasZ are softmaxAsm and softmaxZ as the package
// initialised them.
var smHasAsm, smHasZ = softmaxAsm, softmaxAsm && softmaxZ

// smWith runs f on the kernels impl names (one of smImpls).
func smWith(impl string, f func()) {
	savedAsm, savedZ := softmaxAsm, softmaxZ
	softmaxAsm = impl != "go" && smHasAsm
	softmaxZ = impl == "avx512" && smHasZ
	defer func() { softmaxAsm, softmaxZ = savedAsm, savedZ }()
	f()
}

// smLengths are the row lengths of the table-driven tests.
func smLengths() []int {
	var ls []int
	for n := 0; n <= 33; n++ {
		ls = append(ls, n)
	}
	return append(ls, 64, 65, 1000)
}

// smData returns n seeded logits in about [-12, 12].
func smData(seed uint64, n int) []float32 {
	r := basicRand(seed)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 4)
	}
	return x
}

// expULP is the error of y in float32 ulp of exp(w) (float64 math.Exp).
func expULP(y, w float32) float64 {
	ref := math.Exp(float64(w))
	return math.Abs(float64(y)-ref) / ulp32(ref)
}

// smExpRef is the sum ExpSum must return for y: lane sums in order, then
// the lanes pairwise.
func smExpRef(y []float32) float64 {
	var acc [8]float64
	for j, v := range y {
		acc[j%8] += float64(v)
	}
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

func TestExpSumAccuracy(t *testing.T) {
	ranges := []struct {
		name   string
		lo, hi float32
	}{{"[-87,0]", -87, 0}, {"[0,88]", 0, 88}}
	for _, impl := range smImpls() {
		for _, rg := range ranges {
			t.Run(impl+"/"+rg.name, func(t *testing.T) {
				// Every k-th float32 in the range and a uniform grid.
				k := uint32(241)
				if testing.Short() || impl == "go" {
					k = 997
				}
				var w []float32
				for b := uint32(0); b < 0x42b00000; b += k {
					v := math.Float32frombits(b)
					if v >= 0 && v <= 88 {
						if rg.lo < 0 && v <= 87 {
							w = append(w, -v)
						} else if rg.lo >= 0 {
							w = append(w, v)
						}
					}
				}
				for i := range 100000 {
					w = append(w, rg.lo+(rg.hi-rg.lo)*float32(i)/100000)
				}
				y := make([]float32, len(w))
				smWith(impl, func() { ExpSum(y, w, 1, 0) })
				worst, at := 0.0, float32(0)
				for i, v := range y {
					if e := expULP(v, w[i]); e > worst || e != e {
						worst, at = e, w[i]
					}
				}
				t.Logf("%s %s: %d points, worst error %.3f ulp at w = %v", impl, rg.name, len(w), worst, at)
				if !(worst <= 2) {
					t.Errorf("ExpSum(w = %v) is %.3f ulp from math.Exp, want <= 2", at, worst)
				}
			})
		}
	}
}

func TestExpSumLengths(t *testing.T) {
	for _, impl := range smImpls() {
		for _, n := range smLengths() {
			t.Run(impl+"/"+strconv.Itoa(n), func(t *testing.T) {
				x := smData(uint64(n), n)
				scale, shift := float32(0.35), float32(1.25)
				y := basicGuarded(make([]float32, n))
				var s float64
				smWith(impl, func() { s = ExpSum(y, x, scale, shift) })
				want := make([]float32, n)
				for j, v := range x {
					want[j] = expArg(fma32(v, scale, -shift))
					if e := expULP(y[j], fma32(v, scale, -shift)); e > 2 {
						t.Fatalf("ExpSum: y[%d] = %v, %.2f ulp from exp, want <= 2", j, y[j], e)
					}
				}
				checkSame(t, "ExpSum y", y, want)
				if ref := smExpRef(want); s != ref {
					t.Errorf("ExpSum(len %d) = %v, want %v (lane order)", n, s, ref)
				}
			})
		}
	}
}

func TestExpSumImplsAgree(t *testing.T) {
	if !smHasAsm {
		t.Skip("no assembly kernels on this CPU/build")
	}
	for _, n := range []int{7, 64, 65, 1000, 4099} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := basicRand(uint64(n) + 100)
			x := basicData(r, n, true)
			for i := range x {
				if i%3 == 0 {
					x[i] = float32(r.Float64()*200 - 110)
				}
			}
			scale, shift := float32(0.7), float32(-0.3)
			yg := make([]float32, n)
			var sg float64
			smWith("go", func() { sg = ExpSum(yg, x, scale, shift) })
			for _, impl := range smAsmImpls() {
				ya := make([]float32, n)
				var sa float64
				smWith(impl, func() { sa = ExpSum(ya, x, scale, shift) })
				checkSame(t, impl+" vs go", ya, yg)
				if !sameF64(sa, sg) {
					t.Errorf("ExpSum sum: %s %v, go %v", impl, sa, sg)
				}
			}
		})
	}
}

// TestExpSumImplsAgreeEverywhere runs every 4099th float32 bit pattern
// (both signs: normal, denormal, huge, Inf and NaN) through both
// implementations and wants the same bits.
func TestExpSumImplsAgreeEverywhere(t *testing.T) {
	if !smHasAsm {
		t.Skip("no assembly kernels on this CPU/build")
	}
	var x []float32
	for b := uint64(0); b < 1<<32; b += 4099 {
		x = append(x, math.Float32frombits(uint32(b)))
	}
	yg := make([]float32, len(x))
	smWith("go", func() { ExpSum(yg, x, 1, 0) })
	for _, impl := range smAsmImpls() {
		ya := make([]float32, len(x))
		smWith(impl, func() { ExpSum(ya, x, 1, 0) })
		checkSame(t, impl+" vs go over all float32", ya, yg)
	}
}

func TestExpSumSpecialValues(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name         string
		x            float32
		scale, shift float32
		want         float32
	}{
		{"zero", 0, 1, 0, 1},
		{"shift=x", 3.5, 1, 3.5, 1},
		{"scale=0", 5, 0, 0, 1},
		{"NaN", nan, 1, 0, nan},
		{"NaN shift", 1, 1, nan, nan},
		{"-Inf", -inf, 1, 0, 0},
		{"+Inf", inf, 1, 0, inf},
		{"-88", -88, 1, 0, 0},
		{"-1000", -1000, 1, 0, 0},
		{"-1e30", -1e30, 1, 0, 0},
		{"88.5", 88.5, 1, 0, inf},
		{"1e30", 1e30, 1, 0, inf},
		{"1", 1, 1, 0, float32(math.E)},
	}
	for _, impl := range smImpls() {
		for _, tc := range tests {
			t.Run(impl+"/"+tc.name, func(t *testing.T) {
				for _, n := range []int{1, 8, 9} {
					x := make([]float32, n)
					for i := range x {
						x[i] = tc.x
					}
					y := make([]float32, n)
					var s float64
					smWith(impl, func() { s = ExpSum(y, x, tc.scale, tc.shift) })
					for i, v := range y {
						if !sameF32(v, tc.want) {
							t.Fatalf("ExpSum(%v·%v - %v)[%d] = %v, want %v", tc.x, tc.scale, tc.shift, i, v, tc.want)
						}
					}
					if want := float64(n) * float64(tc.want); !sameF64(s, want) && !(tc.want == float32(math.E) && math.Abs(s-want) < 1e-6) {
						t.Errorf("ExpSum sum of %d = %v, want %v", n, s, want)
					}
				}
			})
		}
	}
	// Between -88 and -87.34 the result is a denormal or 0, never negative.
	for w := float32(-88); w < -87.34; w += 0.01 {
		y := []float32{0}
		ExpSum(y, []float32{w}, 1, 0)
		if !(y[0] >= 0 && y[0] < 0x1p-126) {
			t.Fatalf("ExpSum(%v) = %v, want a denormal or 0", w, y[0])
		}
	}
}

func TestExpSumAliasingAndSplit(t *testing.T) {
	for _, impl := range smImpls() {
		t.Run(impl, func(t *testing.T) {
			const n = 67
			x := smData(7, n)
			want := make([]float32, n)
			var s, sa float64
			smWith(impl, func() { s = ExpSum(want, x, 0.5, 2) })
			y := append([]float32(nil), x...)
			smWith(impl, func() { sa = ExpSum(y, y, 0.5, 2) })
			checkSame(t, "ExpSum(y, y)", y, want)
			if s != sa {
				t.Errorf("ExpSum(y, y) = %v, want %v", sa, s)
			}
			for cut := 0; cut <= n; cut += 8 {
				got := make([]float32, n)
				smWith(impl, func() {
					ExpSum(got[:cut], x[:cut], 0.5, 2)
					ExpSum(got[cut:], x[cut:], 0.5, 2)
				})
				checkSame(t, "split at "+strconv.Itoa(cut), got, want)
			}
		})
	}
}

// TestExpSumNegativeControl checks that the tests can see the argument's
// single rounding: computing it with two roundings changes some outputs.
func TestExpSumNegativeControl(t *testing.T) {
	x := smData(11, 1000)
	scale, shift := float32(0.3), float32(0.7)
	y := make([]float32, len(x))
	ExpSum(y, x, scale, shift)
	differ := 0
	for j, v := range x {
		w2 := float32(v*scale) - shift // rounded twice
		if !sameF32(expArg(w2), y[j]) {
			differ++
		}
	}
	t.Logf("%d of %d outputs change when the argument is rounded twice", differ, len(x))
	if differ == 0 {
		t.Errorf("rounding the argument twice changed no output: the tests cannot tell an FMA from mul+sub")
	}
}

func TestMax(t *testing.T) {
	nan := float32(math.NaN())
	for _, impl := range smImpls() {
		for _, n := range smLengths()[1:] {
			t.Run(impl+"/"+strconv.Itoa(n), func(t *testing.T) {
				x := smData(uint64(n)+50, n)
				want := x[0]
				for _, v := range x {
					want = max(want, v)
				}
				var got float32
				smWith(impl, func() { got = Max(x) })
				if got != want {
					t.Fatalf("Max(len %d) = %v, want %v", n, got, want)
				}
				// The maximum, -Inf and a NaN at every position.
				for i := range x {
					for _, v := range []float32{want + 1, float32(math.Inf(-1)), nan} {
						y := append([]float32(nil), x...)
						y[i] = v
						w := y[0]
						for _, u := range y {
							w = max(w, u) // NaN if any is NaN
						}
						smWith(impl, func() { got = Max(y) })
						if !sameF32(got, w) {
							t.Fatalf("Max with x[%d] = %v (len %d) = %v, want %v", i, v, n, got, w)
						}
					}
				}
			})
		}
	}
}

func TestMaxImplsAgreeOnZeros(t *testing.T) {
	negZero := float32(math.Copysign(0, -1))
	r := basicRand(3)
	for _, n := range []int{5, 16, 37} {
		x := make([]float32, n)
		for i := range x {
			if r.IntN(2) == 0 {
				x[i] = negZero
			}
		}
		for _, impl := range smImpls() {
			var a float32
			smWith(impl, func() { a = Max(x) })
			if math.Float32bits(a) != 0 {
				t.Errorf("Max of ±0 (len %d): %s %#x, want +0", n, impl, math.Float32bits(a))
			}
		}
	}
}

func TestScale(t *testing.T) {
	for _, impl := range smImpls() {
		for _, n := range smLengths() {
			t.Run(impl+"/"+strconv.Itoa(n), func(t *testing.T) {
				x := basicData(basicRand(uint64(n)+9), n, true)
				a := float32(0.37)
				want := make([]float32, n)
				for j, v := range x {
					want[j] = v * a
				}
				y := basicGuarded(make([]float32, n))
				smWith(impl, func() { Scale(y, x, a) })
				checkSame(t, "Scale", y, want)
				smWith(impl, func() { Scale(x, x, a) })
				checkSame(t, "Scale(x, x)", x, want)
			})
		}
	}
}

func TestDot(t *testing.T) {
	for _, n := range smLengths() {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			a, b := smData(uint64(n)+20, n), smData(uint64(n)+21, n+3)
			got := map[string]float64{}
			for _, impl := range smImpls() {
				smWith(impl, func() { got[impl] = Dot(a, b) })
			}
			// The lane order, and the exact sum to within the rounding of n
			// float64 additions.
			var acc [32]float64
			abs := 0.0
			whole, blocks := n&^7, n&^31
			for j := range a {
				p := float64(a[j]) * float64(b[j])
				switch {
				case j < blocks:
					acc[j%32] += p
				case j < whole:
					acc[(j-blocks)%8] += p
				default:
					acc[j-whole] += p
				}
				abs += math.Abs(p)
			}
			exact := smExactSum(a, b)
			var lanes [8]float64
			for l := range lanes {
				lanes[l] = (acc[l] + acc[l+8]) + (acc[l+16] + acc[l+24])
			}
			want := ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
			for impl, g := range got {
				if g != want {
					t.Errorf("%s: Dot(len %d) = %v, want %v (lane order)", impl, n, g, want)
				}
				if math.Abs(g-exact) > float64(n)*0x1p-52*abs {
					t.Errorf("%s: Dot(len %d) = %v, exact %v", impl, n, g, exact)
				}
			}
			if len(got) == 2 && got[asmName] != got["go"] {
				t.Errorf("Dot(len %d): %s %v != go %v", n, asmName, got[asmName], got["go"])
			}
		})
	}
}

// smExactSum is Σ a[j]·b[j] with a compensated (Kahan–Babuška) sum.
func smExactSum(a, b []float32) float64 {
	s, c := 0.0, 0.0
	for j := range a {
		p := float64(a[j]) * float64(b[j])
		t := s + p
		if math.Abs(s) >= math.Abs(p) {
			c += (s - t) + p
		} else {
			c += (p - t) + s
		}
		s = t
	}
	return s + c
}

func TestSoftmaxPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"ExpSum short y", func() { ExpSum(make([]float32, 2), make([]float32, 3), 1, 0) }},
		{"Max empty", func() { Max(nil) }},
		{"Scale short y", func() { Scale(make([]float32, 2), make([]float32, 3), 1) }},
		{"Dot short b", func() { Dot(make([]float32, 3), make([]float32, 2)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tc.name)
				}
			}()
			tc.f()
		})
	}
}

// TestFMA32 checks the exact FMA emulation against cases where rounding
// the float64 sum first would round twice.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		a, b, c := float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()*1e-3)
		got := fma32(a, b, c)
		want := float32(math.FMA(float64(a), float64(b), float64(c))) // may round twice
		if got != want && math.Abs(float64(got-want)) > ulp32(float64(want)) {
			t.Fatalf("fma32(%v, %v, %v) = %v, math.FMA says %v", a, b, c, got, want)
		}
	}
	// (1+2^-23) + 2^-24 - 2^-70: the float64 sum rounds to the tie
	// (1+2^-23) + 2^-24, which would round to even, 1+2^-22; the exact
	// value is below the tie.
	if got, want := fma32(1+0x1p-23, 0x1p-24*(1-0x1p-23), 1+0x1p-23), float32(1+0x1p-23); got != want {
		t.Errorf("fma32 double-rounding case = %v, want %v", got, want)
	}
	if naive := float32(float64(1+0x1p-23) + float64(float32(0x1p-24*(1-0x1p-23)))*float64(1+0x1p-23)); naive == float32(1+0x1p-23) {
		t.Errorf("negative control: the naive double rounding gives %v too; the case tests nothing", naive)
	}
}

func TestSoftmaxAsmAVX2Only(t *testing.T) {
	src, err := os.ReadFile("softmax_amd64.s")
	if err != nil {
		t.Skip("no softmax_amd64.s:", err)
	}
	if m := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`).Find(src); m != nil {
		t.Errorf("softmax_amd64.s uses %s, an AVX-512 register", m)
	}
	if !regexp.MustCompile(`VZEROUPPER\s+RET`).Match(src) {
		t.Errorf("softmax_amd64.s: no kernel ends with VZEROUPPER")
	}
}
