package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// basicLengths are the slice lengths the tests run: empty, below, at and
// around one and several vectors and unrolled trips, and a large odd one.
var basicLengths = []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099}

// basicGuard is the number of sentinel elements past every output slice,
// to catch a kernel writing beyond n.
const basicGuard = 9

// basicRand returns the test's seeded generator; seed names the test.
func basicRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// basicData returns n random floats of mixed signs and magnitudes; with
// specials, about a quarter are ±0, ±Inf, NaN or subnormal.
func basicData(r *rand.Rand, n int, specials bool) []float32 {
	s := make([]float32, n)
	for i := range s {
		k := 20
		if specials {
			k = r.IntN(20)
		}
		switch k {
		case 0:
			s[i] = 0
		case 1:
			s[i] = float32(math.Copysign(0, -1))
		case 2:
			s[i] = float32(math.Inf(1))
		case 3:
			s[i] = float32(math.Inf(-1))
		case 4:
			s[i] = float32(math.NaN())
		case 5:
			s[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // subnormal (or ±0)
		default:
			s[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
		}
	}
	return s
}

// basicGuarded returns a copy of s followed by basicGuard sentinel values,
// sliced to len(s).
func basicGuarded(s []float32) []float32 {
	g := make([]float32, len(s), len(s)+basicGuard)
	copy(g, s)
	for range basicGuard {
		g = append(g, -12345.5)
	}
	return g[:len(s)]
}

// sameF32 reports whether a and b have the same bits or are both NaN (a
// NaN's payload may depend on the operand order the compiler picks).
func sameF32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// checkSame fails t at the first element where got and want differ (in
// the sense of sameF32), and if got's guard elements were overwritten.
func checkSame(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len = %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !sameF32(got[i], want[i]) {
			t.Fatalf("%s[%d] = %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	if cap(got)-len(got) >= basicGuard {
		for i, g := range got[len(got) : len(got)+basicGuard] {
			if g != -12345.5 {
				t.Fatalf("%s: guard element %d past the end = %v, was overwritten", what, i, g)
			}
		}
	}
}

// basicNeedAVX2 skips t when the AVX2 kernels are not in use.
func basicNeedAVX2(t *testing.T) {
	t.Helper()
	if !basicAVX2 {
		t.Skip("no AVX2 kernels on this CPU/build: the public API is the fallback")
	}
}

// basicWithoutAVX2 runs f with the kernels switched off, so that the
// public API runs the fallbacks (the dispatch must then still cover every
// element).
func basicWithoutAVX2(f func()) {
	saved := basicAVX2
	basicAVX2 = false
	defer func() { basicAVX2 = saved }()
	f()
}

// aliasModes are the ways a test passes dst: its own slice, or one of the
// inputs.
var aliasModes = []string{"fresh", "dst=a", "dst=b"}

// binaryOps are the elementwise ops of two slices: the public function,
// its fallback and the definition.
var binaryOps = []struct {
	name      string
	public    func(dst, a, b []float32)
	fallback  func(dst, a, b []float32)
	reference func(a, b float32) float32
}{
	{"Add", Add, addGo, func(a, b float32) float32 { return a + b }},
	{"Mul", Mul, mulGo, func(a, b float32) float32 { return a * b }},
}

func TestBinaryOps(t *testing.T) {
	for _, op := range binaryOps {
		for _, n := range basicLengths {
			for _, mode := range aliasModes {
				t.Run(fmt.Sprintf("%s/n=%d/%s", op.name, n, mode), func(t *testing.T) {
					r := basicRand(uint64(n))
					a, b := basicData(r, n, true), basicData(r, n+3, true) // b longer than dst
					want := make([]float32, n)
					for i := range want {
						want[i] = op.reference(a[i], b[i])
					}
					run := func(f func(dst, a, b []float32)) []float32 {
						a, b := basicGuarded(a), basicGuarded(b)
						dst := basicGuarded(make([]float32, n))
						switch mode {
						case "dst=a":
							dst = a
						case "dst=b":
							dst = b[:n:n] // b's extra elements are data, not guards
						}
						f(dst, a, b)
						return dst
					}
					goOut := run(op.fallback)
					checkSame(t, op.name+"'s fallback", goOut, want)
					t.Run("avx2", func(t *testing.T) {
						basicNeedAVX2(t)
						checkSame(t, op.name, run(op.public), goOut)
					})
					basicWithoutAVX2(func() { checkSame(t, op.name+" without AVX2", run(op.public), goOut) })
				})
			}
		}
	}
}

func TestAddRow(t *testing.T) {
	for _, cols := range []int{1, 3, 8, 13, 128, 384} {
		for _, rows := range []int{0, 1, 3, 7} {
			for _, mode := range []string{"fresh", "dst=x"} {
				t.Run(fmt.Sprintf("C=%d/rows=%d/%s", cols, rows, mode), func(t *testing.T) {
					r := basicRand(uint64(cols*100 + rows))
					x, b := basicData(r, rows*cols, true), basicData(r, cols, true)
					want := make([]float32, rows*cols)
					for i := range rows {
						for c := range cols {
							want[i*cols+c] = x[i*cols+c] + b[c]
						}
					}
					run := func(f func(dst, x, b []float32)) []float32 {
						xg, bg := basicGuarded(x), basicGuarded(b)
						dst := basicGuarded(make([]float32, len(x)))
						if mode == "dst=x" {
							dst = xg
						}
						f(dst, xg, bg)
						checkSame(t, "b after AddRow", bg, b) // b is read only
						return dst
					}
					if rows > 0 {
						goOut := run(addRowGo) // addRowGo requires a non-empty b dividing len(dst)
						checkSame(t, "addRowGo", goOut, want)
					}
					t.Run("avx2", func(t *testing.T) {
						basicNeedAVX2(t)
						checkSame(t, "AddRow", run(AddRow), want)
					})
					basicWithoutAVX2(func() { checkSame(t, "AddRow without AVX2", run(AddRow), want) })
				})
			}
		}
	}
}

// sameF64 is sameF32 for float64.
func sameF64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

func TestAccumF64(t *testing.T) {
	for _, n := range basicLengths {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			r := basicRand(uint64(n) + 7)
			x := basicData(r, n+5, true) // x longer than acc
			acc0 := make([]float64, n+basicGuard)
			for i := range acc0 {
				acc0[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4))
			}
			want := slices.Clone(acc0)
			for i := range n {
				want[i] += float64(x[i])
			}
			run := func(f func(acc []float64, x []float32)) []float64 {
				acc := slices.Clone(acc0)
				// Accumulate twice over the same acc: the second add rounds.
				f(acc[:n], x)
				f(acc[:n], x)
				return acc
			}
			want2 := slices.Clone(want)
			for i := range n {
				want2[i] += float64(x[i])
			}
			check := func(name string, got []float64) {
				for i := range got {
					if !sameF64(got[i], want2[i]) {
						t.Fatalf("%s: acc[%d] = %v, want %v (n = %d)", name, i, got[i], want2[i], n)
					}
				}
			}
			goOut := run(accumF64Go)
			check("accumF64Go", goOut)
			t.Run("avx2", func(t *testing.T) {
				basicNeedAVX2(t)
				check("AccumF64", run(AccumF64))
			})
			basicWithoutAVX2(func() { check("AccumF64 without AVX2", run(AccumF64)) })
		})
	}
}

// TestAccumRows checks that the column sums down rows of x are bitwise
// AccumF64 row by row (AccumRowsF64), and of bf16 bits bitwise that of
// their cast up (AccumRowsBF16F64, on bits of every kind: normals,
// subnormals, infinities, NaNs), on every path, for widths across the
// kernels' groups (AVX-512: 128, 64 and 8 columns; AVX2: 32 and 4) and
// the tail, and that acc past its length is untouched.
func TestAccumRows(t *testing.T) {
	for _, n := range basicLengths {
		for _, rows := range []int{0, 1, 3, 17} {
			t.Run(fmt.Sprintf("n=%d/rows=%d", n, rows), func(t *testing.T) {
				r := basicRand(uint64(n)*31 + uint64(rows))
				ldx := n + 3
				x := basicData(r, rows*ldx, true)
				x16 := make([]uint16, rows*ldx)
				up := make([]float32, len(x16))
				for i := range x16 {
					x16[i] = uint16(r.Uint32())
					up[i] = math.Float32frombits(uint32(x16[i]) << 16)
				}
				acc0 := make([]float64, n+basicGuard)
				for i := range acc0 {
					acc0[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4))
				}
				want, want16 := slices.Clone(acc0), slices.Clone(acc0)
				for q := range rows {
					accumF64Go(want[:n], x[q*ldx:])
					accumF64Go(want16[:n], up[q*ldx:])
				}
				run := func(f func(acc []float64, x []float32, rows, ldx int)) []float64 {
					acc := slices.Clone(acc0)
					f(acc[:n], x, rows, ldx)
					return acc
				}
				run16 := func(f func(acc []float64, x []uint16, rows, ldx int)) []float64 {
					acc := slices.Clone(acc0)
					f(acc[:n], x16, rows, ldx)
					return acc
				}
				check := func(name string, got, want []float64) {
					t.Helper()
					for i := range got {
						if !sameF64(got[i], want[i]) {
							t.Fatalf("%s: acc[%d] = %v, want %v", name, i, got[i], want[i])
						}
					}
				}
				check("accumRowsF64Go", run(accumRowsF64Go), want)
				check("accumRowsBF16F64Go", run16(accumRowsBF16F64Go), want16)
				t.Run("avx2", func(t *testing.T) {
					basicNeedAVX2(t)
					saved := accumZ
					accumZ = false
					defer func() { accumZ = saved }()
					check("AccumRowsF64", run(AccumRowsF64), want)
					check("AccumRowsBF16F64", run16(AccumRowsBF16F64), want16)
				})
				t.Run("avx512", func(t *testing.T) {
					basicNeedAVX2(t)
					if !accumZ {
						t.Skip("no AVX-512 column sums on this CPU/build")
					}
					check("AccumRowsF64", run(AccumRowsF64), want)
					check("AccumRowsBF16F64", run16(AccumRowsBF16F64), want16)
				})
				basicWithoutAVX2(func() {
					check("AccumRowsF64 without AVX2", run(AccumRowsF64), want)
					check("AccumRowsBF16F64 without AVX2", run16(AccumRowsBF16F64), want16)
				})
			})
		}
	}
}

// TestAccumRowsF64CatchesOrder is the negative control of
// TestAccumRows: summing the rows in another order gives other bits on
// its data, so the test could tell.
func TestAccumRowsF64CatchesOrder(t *testing.T) {
	x := []float32{1e17, -1e17, 1} // (3, 1): 1 + -1e17 rounds to -1e17 in float64
	acc := make([]float64, 1)
	AccumRowsF64(acc, x, 3, 1)
	rev := float64(x[2]) + float64(x[1]) + float64(x[0])
	if acc[0] != 1 || rev == acc[0] {
		t.Fatalf("rows in order give %v, reversed %v: want 1 and another value", acc[0], rev)
	}
}

// TestPanics checks that the public API rejects inconsistent lengths
// before any kernel reads past a slice.
func TestPanics(t *testing.T) {
	f := make([]float32, 16)
	cases := []struct {
		name string
		call func()
	}{
		{"Add short a", func() { Add(f, f[:15], f) }},
		{"Add short b", func() { Add(f, f, f[:8]) }},
		{"Mul short a", func() { Mul(f, f[:15], f) }},
		{"Mul short b", func() { Mul(f, f, f[:8]) }},
		{"AddRow x != dst", func() { AddRow(f, f[:8], f[:4]) }},
		{"AddRow not a multiple", func() { AddRow(f, f, f[:5]) }},
		{"AddRow empty b", func() { AddRow(f, f, nil) }},
		{"AccumF64 short x", func() { AccumF64(make([]float64, 16), f[:9]) }},
		{"AccumRowsF64 short x", func() { AccumRowsF64(make([]float64, 8), f, 2, 9) }},
		{"AccumRowsBF16F64 short x", func() { AccumRowsBF16F64(make([]float64, 8), make([]uint16, 16), 2, 9) }},
		{"AccumRowsF64 narrow ldx", func() { AccumRowsF64(make([]float64, 8), f, 2, 7) }},
		{"AccumRowsF64 negative rows", func() { AccumRowsF64(make([]float64, 8), f, -1, 8) }},
		{"Update short g", func() { (&AdamW{}).Update(f, f[:8], f, f) }},
		{"Update short v", func() { (&AdamW{}).Update(f, f, f, f[:15]) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tc.name)
				}
			}()
			tc.call()
		})
	}
	// Valid edge cases do not panic.
	AddRow(nil, nil, nil)
	AddRow(f[:0], f[:0], f[:3])
	Add(nil, nil, nil)
}

// modelsStep are the scalars of one update as models.AdamW.update computes
// them (field names as there).
type modelsStep struct {
	clip, stepSize, bc2Sqrt, b1, b2, c1, c2, eps float32
	lr                                           float64
}

// newModelsStep computes the scalars of step t like models.AdamW.update.
func newModelsStep(lr, beta1, beta2, eps float64, t int, clip float32) modelsStep {
	bc1 := 1 - math.Pow(beta1, float64(t))
	bc2 := 1 - math.Pow(beta2, float64(t))
	return modelsStep{
		clip: clip, stepSize: float32(lr / bc1), bc2Sqrt: float32(math.Sqrt(bc2)),
		b1: float32(beta1), b2: float32(beta2), c1: float32(1 - beta1), c2: float32(1 - beta2),
		eps: float32(eps), lr: lr,
	}
}

// modelsUpdate is a verbatim copy of the loops of
// models.AdamW.updateRange over one parameter, the reference Update must
// reproduce bit for bit.
func modelsUpdate(s modelsStep, weightDecay float64, w, g, mm, vv []float32) {
	if weightDecay != 0 {
		d := float32(1 - s.lr*weightDecay)
		for j := range w {
			w[j] *= d
		}
	}
	for j, gj := range g {
		gj *= s.clip
		mm[j] = s.b1*mm[j] + s.c1*gj
		vv[j] = s.b2*vv[j] + s.c2*gj*gj
		denom := float32(math.Sqrt(float64(vv[j])))/s.bc2Sqrt + s.eps
		w[j] -= s.stepSize * mm[j] / denom
	}
}

// vecStep converts s to Update's scalars.
func vecStep(s modelsStep, weightDecay float64) AdamW {
	decay := float32(1)
	if weightDecay != 0 {
		decay = float32(1 - s.lr*weightDecay)
	}
	return AdamW{Decay: decay, Clip: s.clip, B1: s.b1, C1: s.c1, B2: s.b2, C2: s.c2, Bc2Sqrt: s.bc2Sqrt, Eps: s.eps, StepSize: s.stepSize}
}

// basicMulAdd is x*y + z as the compiler builds it, fused or not.
//
//go:noinline
func basicMulAdd(x, y, z float32) float32 { return x*y + z }

// compilerFuses reports whether this build fuses x*y+z into one FMA (as
// GOAMD64=v3 does): (1+2⁻¹²)² - (1+2⁻¹¹) is 0 rounded twice, 2⁻²⁴ fused.
func compilerFuses() bool {
	const x = 1 + 1.0/(1<<12)
	return basicMulAdd(x, x, -(1+1.0/(1<<11))) != 0
}

// adamwState is w, g, m, v of one test case.
type adamwState struct{ w, g, m, v []float32 }

func newAdamwState(r *rand.Rand, n int, specials bool) adamwState {
	st := adamwState{basicData(r, n, specials), basicData(r, n, specials), basicData(r, n, specials), basicData(r, n, specials)}
	for i, v := range st.v {
		if !specials || r.IntN(8) > 0 {
			st.v[i] = float32(math.Abs(float64(v))) // mostly a valid second moment
		}
	}
	return st
}

func (st adamwState) clone() adamwState {
	return adamwState{basicGuarded(st.w), basicGuarded(st.g), basicGuarded(st.m), basicGuarded(st.v)}
}

func (st adamwState) check(t *testing.T, what string, want adamwState) {
	t.Helper()
	checkSame(t, what+" w", st.w, want.w)
	checkSame(t, what+" m", st.m, want.m)
	checkSame(t, what+" v", st.v, want.v)
	checkSame(t, what+" g", st.g, want.g)
}

func TestAdamWUpdate(t *testing.T) {
	type adamwCase struct {
		step     int
		wd       float64
		clip     float32
		specials bool
	}
	var cases []adamwCase
	for _, step := range []int{1, 10, 1000} {
		for _, wd := range []float64{0.1, 0} {
			cases = append(cases, adamwCase{step, wd, 1, false}, adamwCase{step, wd, 0.37, true})
		}
	}
	for _, tc := range cases {
		for _, n := range basicLengths {
			t.Run(fmt.Sprintf("t=%d/wd=%g/clip=%g/specials=%v/n=%d", tc.step, tc.wd, tc.clip, tc.specials, n), func(t *testing.T) {
				r := basicRand(uint64(tc.step*10000 + n))
				st := newAdamwState(r, n, tc.specials)
				ms := newModelsStep(1e-3, 0.9, 0.95, 1e-8, tc.step, tc.clip)
				s := vecStep(ms, tc.wd)

				goOut := st.clone()
				adamwGo(&s, goOut.w, goOut.g, goOut.m, goOut.v)
				if compilerFuses() {
					t.Log("the compiler fuses x*y+z (GOAMD64=v3): models' loop is not bit-reproducible here; checking Update against adamwGo only")
				} else {
					want := st.clone()
					modelsUpdate(ms, tc.wd, want.w, want.g, want.m, want.v)
					goOut.check(t, "adamwGo vs models loop:", want)
				}
				t.Run("avx2", func(t *testing.T) {
					basicNeedAVX2(t)
					got := st.clone()
					s.Update(got.w, got.g, got.m, got.v)
					got.check(t, "Update vs adamwGo:", goOut)
				})
				basicWithoutAVX2(func() {
					got := st.clone()
					s.Update(got.w, got.g, got.m, got.v)
					got.check(t, "Update without AVX2 vs adamwGo:", goOut)
				})
			})
		}
	}
}

// TestAdamWFMASensitive is the negative control of TestAdamWUpdate: the
// moment update with a fused multiply-add gives different bits on
// ordinary data, so the bitwise comparisons would catch an FMA kernel.
func TestAdamWFMASensitive(t *testing.T) {
	r := basicRand(42)
	st := newAdamwState(r, 4099, false)
	s := vecStep(newModelsStep(1e-3, 0.9, 0.95, 1e-8, 10, 1), 0.1)
	fma := func(x, y, z float32) float32 { return float32(math.FMA(float64(x), float64(y), float64(z))) }
	var diffM, diffV int
	for i := range st.g {
		gj := float32(st.g[i] * s.Clip)
		m := float32(s.B1*st.m[i]) + float32(s.C1*gj)
		v := float32(s.B2*st.v[i]) + float32(float32(s.C2*gj)*gj)
		if m != fma(s.B1, st.m[i], float32(s.C1*gj)) {
			diffM++
		}
		if v != fma(s.B2, st.v[i], float32(float32(s.C2*gj)*gj)) {
			diffV++
		}
	}
	if diffM == 0 || diffV == 0 {
		t.Errorf("FMA moments differ from the rounded ones in %d (m) and %d (v) of %d elements, want both > 0", diffM, diffV, len(st.g))
	}
	t.Logf("FMA changes m in %d and v in %d of %d elements", diffM, diffV, len(st.g))
}
