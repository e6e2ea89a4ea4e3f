package precision

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// run is a stretch of a scripted trace: n steps whose gradients are all
// finite ('F'), or hold an Inf ('I') or a NaN ('N').
type run struct {
	n    int
	kind byte
}

// parseTrace reads a trace like "3F I 2F N": runs separated by spaces, a
// count (default 1) and a kind.
func parseTrace(t *testing.T, s string) []run {
	t.Helper()
	var rs []run
	for _, f := range strings.Fields(s) {
		n := 0
		for f[0] >= '0' && f[0] <= '9' {
			n = 10*n + int(f[0]-'0')
			f = f[1:]
		}
		if n == 0 {
			n = 1
		}
		if len(f) != 1 || !strings.Contains("FIN", f) {
			t.Fatalf("bad trace run %q", f)
		}
		rs = append(rs, run{n, f[0]})
	}
	return rs
}

// stepGrads returns the gradients of one step: two slices (one longer
// than a kernel group, one with a tail), with the bad value, if any, at
// position pos of the second or the first slice.
func stepGrads(kind byte, step int) [][]float32 {
	g := [][]float32{make([]float32, 37), make([]float32, 5)}
	for _, s := range g {
		for i := range s {
			s[i] = float32(i%7) - 3
		}
	}
	bad := float32(math.Inf(1))
	if kind == 'N' {
		bad = float32(math.NaN())
	}
	if kind != 'F' {
		s := g[step%2]
		s[(7*step)%len(s)] = bad
	}
	return g
}

// TestScalerTraces runs scripted overflow traces and checks the scale
// after every step and which steps were skipped.
func TestScalerTraces(t *testing.T) {
	small := ScalerConfig{InitScale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, MinScale: 1}
	top := small
	top.InitScale, top.GrowthInterval = 0x1p127, 2
	tests := []struct {
		name  string
		cfg   ScalerConfig
		trace string
		// want: the scale after each step; skip: the 1-based skipped steps.
		want []float32
		skip []int
	}{
		{"growth, backoff, floor", small, "3F I 2F 3I N 4F",
			[]float32{8, 8, 16, 8, 8, 8, 4, 2, 1, 1, 1, 1, 2, 2}, []int{4, 7, 8, 9, 10}},
		{"an overflow restarts the count", small, "2F I 2F I 3F",
			[]float32{8, 8, 4, 4, 4, 2, 2, 2, 4}, []int{3, 6}},
		{"no growth past float32", top, "2F 2F I 2F",
			[]float32{0x1p127, 0x1p127, 0x1p127, 0x1p127, 0x1p126, 0x1p126, 0x1p127}, []int{5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewScaler(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			var got []float32
			var skipped []int
			step := 0
			for _, r := range parseTrace(t, tc.trace) {
				for range r.n {
					step++
					if l := s.ScaleLoss(1.5); l != 1.5*s.Scale() {
						t.Fatalf("step %d: ScaleLoss(1.5) = %v at scale %v", step, l, s.Scale())
					}
					ok := s.Unscale(stepGrads(r.kind, step)...)
					if ok != (r.kind == 'F') {
						t.Fatalf("step %d (%c): Unscale = %v", step, r.kind, ok)
					}
					if s.Update() {
						skipped = append(skipped, step)
					}
					got = append(got, s.Scale())
				}
			}
			if !equalF32(got, tc.want) {
				t.Errorf("scales %v, want %v", got, tc.want)
			}
			if !slices.Equal(skipped, tc.skip) {
				t.Errorf("skipped steps %v, want %v", skipped, tc.skip)
			}
			if s.Steps() != step || s.Skipped() != len(tc.skip) {
				t.Errorf("Steps, Skipped = %d, %d, want %d, %d", s.Steps(), s.Skipped(), step, len(tc.skip))
			}
		})
	}
}

// TestScalerDefaults checks GradScaler's defaults on long traces: the
// scale doubles exactly at the 2000th finite step in a row, an overflow
// at step 1999 halves it and restarts the count.
func TestScalerDefaults(t *testing.T) {
	for _, tc := range []struct {
		trace string
		at    map[int]float32 // step → the scale after it
	}{
		{"2001F", map[int]float32{1: 65536, 1999: 65536, 2000: 131072, 2001: 131072}},
		{"1998F I 2000F", map[int]float32{1998: 65536, 1999: 32768, 3998: 32768, 3999: 65536}},
	} {
		s, err := NewScaler(DefaultScalerConfig())
		if err != nil {
			t.Fatal(err)
		}
		step := 0
		for _, r := range parseTrace(t, tc.trace) {
			for range r.n {
				step++
				s.Unscale(stepGrads(r.kind, step)...)
				s.Update()
				if w, ok := tc.at[step]; ok && s.Scale() != w {
					t.Errorf("%s: scale after step %d = %v, want %v", tc.trace, step, s.Scale(), w)
				}
			}
		}
	}
}

// TestUnscaleValues checks that Unscale multiplies every value by the
// float32 reciprocal of the scale, with each kernel set, and leaves the
// bits alone at scale 1 (even a signaling NaN's).
func TestUnscaleValues(t *testing.T) {
	for name, ks := range kernelSets() {
		withKernels(ks, func() {
			for _, scale := range []float32{1024, 3, 1} {
				cfg := DefaultScalerConfig()
				cfg.InitScale = scale
				s, err := NewScaler(cfg)
				if err != nil {
					t.Fatal(err)
				}
				g := randomNormals(1001)
				g[500] = math.Float32frombits(0x7F800001) // a signaling NaN
				want := make([]uint32, len(g))
				inv := float32(1 / float64(scale))
				for i, v := range g {
					want[i] = math.Float32bits(v * inv)
					if scale == 1 {
						want[i] = math.Float32bits(v)
					}
				}
				if s.Unscale(g) {
					t.Fatalf("%s: Unscale missed the NaN", name)
				}
				for i, v := range g {
					if b := math.Float32bits(v); b != want[i] && !(i == 500 && v != v) {
						t.Fatalf("%s: scale %v: g[%d] = %#08x, want %#08x", name, scale, i, b, want[i])
					}
				}
			}
		})
	}
}

// allFinite reports whether every value of every slice is finite (no Inf,
// no NaN), by maxAbsBits without scaling: the check Unscale makes at
// scale 1.
func allFinite(xs ...[]float32) bool {
	for _, x := range xs {
		if maxAbsBits(x, 1, false) >= 0x7F800000 {
			return false
		}
	}
	return true
}

// TestAllFinite checks the finiteness check on every position of a slice
// (kernel groups and tails), with each kernel set.
func TestAllFinite(t *testing.T) {
	for name, ks := range kernelSets() {
		withKernels(ks, func() {
			x := randomNormals(77)
			if !allFinite(x, x[:3], nil) {
				t.Fatalf("%s: allFinite of finite values = false", name)
			}
			for _, bad := range []uint32{0x7F800000, 0xFF800000, 0x7FC00000, 0xFFFFFFFF} {
				for i := range x {
					old := x[i]
					x[i] = math.Float32frombits(bad)
					if allFinite(x) {
						t.Fatalf("%s: allFinite with %#08x at %d = true", name, bad, i)
					}
					x[i] = old
				}
			}
			x[10] = math.MaxFloat32
			if !allFinite(x) {
				t.Fatalf("%s: allFinite with MaxFloat32 = false", name)
			}
		})
	}
}

// TestScalerConfigErrors checks that each bad setting is rejected with
// ErrScalerConfig naming it.
func TestScalerConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*ScalerConfig)
	}{
		{"MinScale", func(c *ScalerConfig) { c.MinScale = 0 }},
		{"MinScale", func(c *ScalerConfig) { c.MinScale = float32(math.NaN()) }},
		{"InitScale", func(c *ScalerConfig) { c.InitScale = 0.5 }},
		{"InitScale", func(c *ScalerConfig) { c.InitScale = float32(math.Inf(1)) }},
		{"GrowthFactor", func(c *ScalerConfig) { c.GrowthFactor = 1 }},
		{"BackoffFactor", func(c *ScalerConfig) { c.BackoffFactor = 1 }},
		{"BackoffFactor", func(c *ScalerConfig) { c.BackoffFactor = 0 }},
		{"GrowthInterval", func(c *ScalerConfig) { c.GrowthInterval = 0 }},
	} {
		c := DefaultScalerConfig()
		tc.set(&c)
		_, err := NewScaler(c)
		if !errors.Is(err, ErrScalerConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("NewScaler with bad %s: err = %v, want ErrScalerConfig naming it", tc.field, err)
		}
	}
	if _, err := NewScaler(DefaultScalerConfig()); err != nil {
		t.Errorf("NewScaler(DefaultScalerConfig()) = %v", err)
	}
}

// TestUpdateWithoutUnscale checks that Update panics without an Unscale.
func TestUpdateWithoutUnscale(t *testing.T) {
	s, _ := NewScaler(DefaultScalerConfig())
	defer func() {
		if recover() == nil {
			t.Fatal("Update without Unscale did not panic")
		}
	}()
	s.Update()
}

func equalF32(a, b []float32) bool {
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

// TestScalerStateRoundTrip: a scaler restored from another's state
// midway through a trace follows the same scales and skips from there;
// states out of range are refused.
func TestScalerStateRoundTrip(t *testing.T) {
	cfg := ScalerConfig{InitScale: 8, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 3, MinScale: 1}
	trace := parseTrace(t, "2F I 2F 2I 5F")
	var kinds []byte
	for _, r := range trace {
		for range r.n {
			kinds = append(kinds, r.kind)
		}
	}
	step := func(s *Scaler, i int) (float32, bool) {
		s.Unscale(stepGrads(kinds[i], i)...)
		skipped := s.Update()
		return s.Scale(), skipped
	}
	for cut := range kinds {
		whole, _ := NewScaler(cfg)
		first, _ := NewScaler(cfg)
		for i := range cut {
			step(whole, i)
			step(first, i)
		}
		resumed, _ := NewScaler(cfg)
		if err := resumed.SetState(first.State()); err != nil {
			t.Fatalf("cut %d: SetState(%+v): %v", cut, first.State(), err)
		}
		for i := cut; i < len(kinds); i++ {
			ws, wk := step(whole, i)
			rs, rk := step(resumed, i)
			if ws != rs || wk != rk {
				t.Fatalf("cut %d, step %d: resumed scale %v skipped %v, want %v %v", cut, i, rs, rk, ws, wk)
			}
		}
		if whole.State() != resumed.State() {
			t.Errorf("cut %d: final state %+v, want %+v", cut, resumed.State(), whole.State())
		}
	}
	s, _ := NewScaler(cfg)
	for _, bad := range []ScalerState{
		{Scale: 0.5}, {Scale: float32(math.Inf(1))}, {Scale: float32(math.NaN())},
		{Scale: 8, Tracker: 3}, {Scale: 8, Tracker: -1}, {Scale: 8, Steps: 1, Skipped: 2}, {Scale: 8, Skipped: -1},
	} {
		if err := s.SetState(bad); !errors.Is(err, ErrScalerConfig) {
			t.Errorf("SetState(%+v) = %v, want ErrScalerConfig", bad, err)
		}
	}
}
