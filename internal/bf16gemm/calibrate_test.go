package bf16gemm

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// countingDot is the emulated VDPBF16PS kernel under the real one's name,
// counting its tile calls: the tests see which path a product took.
func countingDot(calls *atomic.Int64) pathImpl {
	k := emuDotKernel()
	tile := k.tile
	k.tile = func(pairs int, a, b *uint16, c *float32, ldc int, acc bool) {
		calls.Add(1)
		tile(pairs, a, b, c, ldc, acc)
	}
	return pathImpl{"avx512bf16", k}
}

// withPaths runs the test on the paths ps (widen first) with the
// calibration's clock replaced by fake, restoring the real state after.
func withPaths(t *testing.T, ps []pathImpl, fake func(p pathImpl) float64) {
	initPaths()
	pathMu.Lock()
	old, oldForced, oldEnv, oldChoices, oldCausal, oldClock := paths, forced, byEnv, choices, causalChoices, clock
	paths, forced, byEnv, choices, causalChoices = ps, nil, false, nil, nil
	if fake != nil {
		clock = func(p pathImpl, f func()) float64 { f(); return fake(p) }
	}
	pathMu.Unlock()
	t.Cleanup(func() {
		pathMu.Lock()
		paths, forced, byEnv, choices, causalChoices, clock = old, oldForced, oldEnv, oldChoices, oldCausal, oldClock
		pathMu.Unlock()
	})
}

// timesOf is a fake clock: each path's time by name.
func timesOf(ts map[string]float64) func(pathImpl) float64 {
	return func(p pathImpl) float64 { return ts[p.name] }
}

// product is a 40×70×64 A·Bᵀ problem and its C as refDot computes it.
func product(t *testing.T) (operands, []float32) {
	o := testOperands(false, true, 40, 70, 64, normalVal(rand.New(rand.NewPCG(9, 9))))
	want := make([]float32, len(o.c))
	for i := range o.m {
		for j := range o.n {
			want[i*o.ldc+j] = refDot(o, i, j)
		}
	}
	return o, want
}

func gemmOf(o operands) {
	Gemm(trans(o.aT), trans(o.bT), o.m, o.n, o.k, o.a, o.lda, o.b, o.ldb, o.c, o.ldc)
}

// TestCalibrationChoiceHonoured: the path a shape's calibration times
// fastest is the one its products take (the kernel's tiles run, C is the
// kernel's contract bit for bit), a hardware path within the margin of
// widen's time is not chosen, and a forced path overrides the choice.
func TestCalibrationChoiceHonoured(t *testing.T) {
	for _, tc := range []struct {
		name   string
		times  map[string]float64
		forced string
		want   string
	}{
		{"kernel faster", map[string]float64{"widen": 2e-3, "avx512bf16": 1e-3}, "", "avx512bf16"},
		{"widen faster", map[string]float64{"widen": 1e-3, "avx512bf16": 2e-3}, "", "widen"},
		{"within the margin", map[string]float64{"widen": 1e-3, "avx512bf16": 0.99e-3}, "", "widen"},
		{"forced kernel", map[string]float64{"widen": 1e-3, "avx512bf16": 2e-3}, "avx512bf16", "avx512bf16"},
		{"forced widen", map[string]float64{"widen": 2e-3, "avx512bf16": 1e-3}, "widen", "widen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			withPaths(t, []pathImpl{{"widen", nil}, countingDot(&calls)}, timesOf(tc.times))
			if tc.forced != "" {
				if err := SetPath(tc.forced); err != nil {
					t.Fatal(err)
				}
			}
			o, want := product(t)
			gemmOf(o) // calibrates (unless forced)
			calls.Store(0)
			gemmOf(o)
			took := "widen"
			if calls.Load() > 0 {
				took = "avx512bf16"
			}
			if took != tc.want {
				t.Fatalf("the product took %s, want %s (Path() = %q)", took, tc.want, Path())
			}
			ref := refDot
			if took == "widen" {
				ref = nil
			}
			for i := range o.m {
				for j := range o.n {
					got := o.c[i*o.ldc+j]
					if ref != nil && !sameBits(got, want[i*o.ldc+j]) {
						t.Fatalf("C[%d,%d] = %v, the kernel's contract gives %v", i, j, got, want[i*o.ldc+j])
					}
					if r, mag := o.ref(i, j); !(math.Abs(float64(got)-r) <= 2*float64(o.k)*0x1p-24*mag) {
						t.Fatalf("C[%d,%d] = %v, want %v", i, j, got, r)
					}
				}
			}
			cs := Choices()
			switch {
			case tc.forced != "" && len(cs) != 0:
				t.Errorf("a forced path calibrated %v", cs)
			case tc.forced == "" && (len(cs) != 1 || cs[0].Path != tc.want || cs[0].Rounds < minRounds):
				t.Errorf("Choices() = %v, want one shape choosing %s after %d rounds at least", cs, tc.want, minRounds)
			case tc.forced == "" && !strings.Contains(Path(), tc.want+" ×1"):
				t.Errorf("Path() = %q, want it to name %s ×1", Path(), tc.want)
			}
		})
	}
}

// TestEnvForcesPath: GPTLAB_BF16 read at first use forces its path over
// the calibration's choice (here, a calibration that would choose the
// other), names it in Path, and a value naming no path or one this
// machine lacks is an error naming the variable, the value and why.
func TestEnvForcesPath(t *testing.T) {
	rerun := func() { // findPaths again, as a new process would
		pathOnce, paths, forced, byEnv, choices, envErr = sync.Once{}, nil, nil, false, nil, nil
		initPaths()
	}
	t.Cleanup(rerun) // after t.Setenv's own cleanups have restored the variable
	for _, v := range []string{"widen", "avx512bf16", "amx"} {
		t.Setenv(EnvPath, v)
		rerun()
		err := EnvError()
		if !strings.Contains(strings.Join(Paths(), " "), v) {
			if err == nil || !strings.Contains(err.Error(), EnvPath+"="+v) || !strings.Contains(err.Error(), "not available") {
				t.Errorf("%s=%s on a machine without it: EnvError() = %v", EnvPath, v, err)
			}
			continue
		}
		if err != nil || Mode() != v || Path() != v+" ("+EnvPath+")" {
			t.Errorf("%s=%s: EnvError() = %v, Mode() = %q, Path() = %q", EnvPath, v, err, Mode(), Path())
		}
	}
	t.Setenv(EnvPath, "off")
	rerun()
	if err := EnvError(); err != nil || len(Paths()) != 1 || Path() != "widen ("+EnvPath+"=off)" {
		t.Errorf("%s=off: EnvError() = %v, Paths() = %v, Path() = %q, want widen alone", EnvPath, err, Paths(), Path())
	}
	// On emulated paths, so that the forced kernel exists on any machine:
	// the environment's path wins over a calibration preferring the other.
	for _, tc := range []struct{ env, faster, want string }{
		{"widen", "avx512bf16", "widen"}, {"avx512bf16", "widen", "avx512bf16"}, {"", "avx512bf16", "avx512bf16"}, {"", "widen", "widen"},
	} {
		var calls atomic.Int64
		withPaths(t, []pathImpl{{"widen", nil}, countingDot(&calls)}, func(p pathImpl) float64 {
			if p.name == tc.faster {
				return 1e-3
			}
			return 2e-3
		})
		if err := applyEnv(tc.env); err != nil {
			t.Fatal(err)
		}
		o, _ := product(t)
		gemmOf(o)
		calls.Store(0)
		gemmOf(o)
		if took := calls.Load() > 0; took != (tc.want == "avx512bf16") {
			t.Errorf("%s=%q, calibration preferring %s: kernel tiles %d, want the product on %s", EnvPath, tc.env, tc.faster, calls.Load(), tc.want)
		}
	}
	for _, v := range []string{"bogus", "AMX", "auto "} {
		if err := applyEnv(v); err == nil || !strings.Contains(err.Error(), EnvPath+"="+v) || !strings.Contains(err.Error(), "unknown") {
			t.Errorf("%s=%q: %v, want an unknown-path error naming it", EnvPath, v, err)
		}
	}
}

// TestGemmF32 checks GemmF32 and GemmMixed's two mixed forms on every
// path, forms and edge shapes: on widen they are internal/sgemm on the
// same values bit for bit, on a packed path the kernel's result on the
// operands' bf16 bits (Gemm's) bit for bit, so an operand gives the same
// product held either way.
func TestGemmF32(t *testing.T) {
	var calls atomic.Int64
	withPaths(t, []pathImpl{{"widen", nil}, countingDot(&calls), {"amx", emuAMXKernel(false)}}, nil)
	rng := rand.New(rand.NewPCG(6, 7))
	for _, name := range Paths() {
		if err := SetPath(name); err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			for _, s := range shapes {
				o := testOperands(f.aT, f.bT, s.m, s.n, s.k, normalVal(rng))
				a32, b32 := make([]float32, len(o.a)), make([]float32, len(o.b))
				precision.DecodeBF16(a32, o.a)
				precision.DecodeBF16(b32, o.b)
				want := append([]float32(nil), o.c...)
				if name == "widen" {
					sgemm.Implementation{}.Sgemm(trans(f.aT), trans(f.bT), s.m, s.n, s.k, 1, a32, o.lda, b32, o.ldb, 0, want, o.ldc)
				} else {
					gemmOf(o)
					want = append(want[:0], o.c...)
				}
				for _, in := range []struct {
					what string
					a, b Operand
				}{
					{"GemmF32", Operand{F32: a32}, Operand{F32: b32}},
					{"GemmMixed(f32, bf16)", Operand{F32: a32}, Operand{U16: o.b}},
					{"GemmMixed(bf16, f32)", Operand{U16: o.a}, Operand{F32: b32}},
				} {
					got := make([]float32, len(o.c))
					if in.what == "GemmF32" {
						GemmF32(trans(f.aT), trans(f.bT), s.m, s.n, s.k, a32, o.lda, b32, o.ldb, got, o.ldc)
					} else {
						GemmMixed(trans(f.aT), trans(f.bT), s.m, s.n, s.k, in.a, o.lda, in.b, o.ldb, got, o.ldc)
					}
					for i := range s.m {
						for j := range s.n {
							if g, w := got[i*o.ldc+j], want[i*o.ldc+j]; !sameBits(g, w) {
								t.Fatalf("%s on %s aT=%v bT=%v %v: C[%d,%d] = %v, want %v", in.what, name, f.aT, f.bT, s, i, j, g, w)
							}
						}
					}
				}
			}
		}
	}
}

// TestCalibrateHere calibrates two of the GPT's shapes on this machine's
// real paths and checks the record: a time for every path, the choice
// the fastest beyond the margin, Path naming the choices.
func TestCalibrateHere(t *testing.T) {
	if len(Paths()) == 1 {
		t.Skip("no hardware bf16 path here: nothing to calibrate")
	}
	withPaths(t, paths, nil)
	for _, s := range []struct{ m, n, k int }{{96, 128, 128}, {96, 32, 256}} {
		o := testOperands(false, true, s.m, s.n, s.k, normalVal(rand.New(rand.NewPCG(1, 2))))
		gemmOf(o)
	}
	cs := Choices()
	if len(cs) != 2 {
		t.Fatalf("Choices() = %v, want 2 shapes", cs)
	}
	for _, c := range cs {
		fastest := 0
		for i, s := range c.Seconds {
			if !(s > 0) || len(c.Seconds) != len(Paths()) {
				t.Fatalf("%v: times %v", c, c.Seconds)
			}
			if i > 0 && s < (1-margin)*c.Seconds[0] && s < c.Seconds[fastest] {
				fastest = i
			}
		}
		if c.Path != c.Paths[fastest] {
			t.Errorf("%v: times %v, want %s chosen", c, c.Seconds, c.Paths[fastest])
		}
		t.Logf("%v: %.1f GFLOP/s on %s", c, c.Rate(c.chosen), c.Path)
	}
	if p := Path(); !strings.HasPrefix(p, "calibrated: ") {
		t.Errorf("Path() = %q, want the calibrated choices", p)
	}
}
