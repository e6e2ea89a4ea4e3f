package models

import (
	"math"
	"slices"
	"testing"

	"gptlab/internal/testutil"
)

// TestUnitsComposeToTheModel: the segments of the chain, each built and
// run as a unit (forward, then a backward that recomputes the forward and
// propagates the upstream gradient), composed over every layer, give the
// whole model's loss and every gradient bitwise, with dropout on.
func TestUnitsComposeToTheModel(t *testing.T) {
	for _, name := range []string{"tiny", "small"} {
		t.Run(name, func(t *testing.T) {
			if name == "small" {
				testutil.SkipEmulated(t, "small runs natively; emulated, tiny composes its units the same way")
			}
			cfg, _ := Preset(name)
			cfg.Dropout = 0.1
			p := NewParams(cfg, 7)
			m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			const seed, step = 11, 3
			m.SetDropoutSeed(seed)
			m.SetDropoutKey(step)
			idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 5)
			want, err := m.Step(idx, tgt)
			if err != nil {
				t.Fatal(err)
			}

			chain := Chain(cfg)
			units := make([]*Unit, len(chain))
			for i, seg := range chain {
				if units[i], err = NewUnit(cfg, p, seg, cfg.Batch, cfg.Block); err != nil {
					t.Fatal(err)
				}
				defer units[i].Close()
				units[i].SetDropout(seed, step)
				if err := units[i].SetTokens(idx, tgt); err != nil {
					t.Fatal(err)
				}
			}
			xs := make([][]float32, len(chain)) // xs[i]: the input of segment i
			var out []float32
			for i, u := range units {
				xs[i] = slices.Clone(out)
				if out, err = u.Forward(xs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if got := out[0]; got != want {
				t.Fatalf("units' loss %v, the model's %v", got, want)
			}
			grads := map[string][]float32{}
			var dy []float32
			for i := len(units) - 1; i >= 0; i-- {
				dx, err := units[i].Backward(xs[i], dy)
				if err != nil {
					t.Fatal(err)
				}
				for _, pn := range units[i].Params() {
					g := units[i].Grad(pn, make([]float32, len(p.Slice(pn))))
					if prev, ok := grads[pn]; ok { // the token embedding: head, then embedding
						for j := range g {
							g[j] = prev[j] + g[j]
						}
					}
					grads[pn] = g
				}
				dy = slices.Clone(dx)
			}
			for _, pn := range p.Names() {
				got, ok := grads[pn]
				if !ok {
					t.Fatalf("no unit computed the gradient of %s", pn)
				}
				if d := testutil.MaxAbsDiff(got, m.Grad(pn)); d != 0 {
					t.Errorf("%s: units' gradient differs from the model's by up to %g", pn, d)
				}
			}
		})
	}
}

// TestUnitSeesTheUpstreamGradient is the negative control: a different
// upstream gradient gives a different input gradient, so the unit's
// backward really starts from dy.
func TestUnitSeesTheUpstreamGradient(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 2)
	u, err := NewUnit(cfg, p, Segment{Kind: SegMLP, Layer: 1}, cfg.Batch, cfg.Block)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	n := cfg.Batch * cfg.Block * cfg.Embd
	x, dy := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], dy[i] = float32(math.Sin(float64(i))), float32(math.Cos(float64(3*i)))
	}
	a, err := u.Backward(x, dy)
	if err != nil {
		t.Fatal(err)
	}
	a = slices.Clone(a)
	for i := range dy {
		dy[i] *= 2
	}
	b, err := u.Backward(x, dy)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a, b) {
		t.Error("doubling dy left dx unchanged")
	}
	if _, err := NewUnit(cfg, p, Segment{Kind: SegAttn, Layer: cfg.Layers}, 1, 4); err == nil {
		t.Errorf("NewUnit of layer %d of %d: no error", cfg.Layers, cfg.Layers)
	}
}
