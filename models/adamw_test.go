package models

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"gptlab/internal/par"
	"gptlab/internal/testutil"
	"gptlab/precision"
)

// adamwScalar is torch's AdamW for one scalar parameter, written
// independently in float64 from the torch documentation's algorithm.
func adamwScalar(p, g float64, steps int, lr, b1, b2, eps, wd float64) float64 {
	var m, v float64
	for t := 1; t <= steps; t++ {
		p -= lr * wd * p
		m = b1*m + (1-b1)*g
		v = b2*v + (1-b2)*g*g
		mhat := m / (1 - math.Pow(b1, float64(t)))
		vhat := v / (1 - math.Pow(b2, float64(t)))
		p -= lr * mhat / (math.Sqrt(vhat) + eps)
	}
	return p
}

func TestAdamWAgainstScalarFormula(t *testing.T) {
	cfg, _ := Preset("tiny")
	for _, tc := range []struct {
		name  string
		param string
		decay bool
	}{
		{"2-D weight decays", "transformer.h.0.mlp.c_fc.weight", true},
		{"embedding decays", "transformer.wpe.weight", true},
		{"bias does not", "transformer.h.1.attn.c_proj.bias", false},
		{"LayerNorm does not", "transformer.ln_f.weight", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParams(cfg, 2)
			if p.Decays(tc.param) != tc.decay {
				t.Fatalf("Decays(%s) = %v, want %v", tc.param, p.Decays(tc.param), tc.decay)
			}
			o := DefaultAdamW()
			opt := NewAdamW(p, o)
			g := make([]float32, p.Count())
			for i := range g {
				g[i] = float32(math.Sin(float64(i))) * 1e-2
			}
			before := append([]float32(nil), p.Slice(tc.param)...)
			off := p.Offset(tc.param)
			for k := 0; k < 5; k++ {
				if _, err := opt.StepFlat(g, 2e-3); err != nil {
					t.Fatal(err)
				}
			}
			wd := 0.0
			if tc.decay {
				wd = o.WeightDecay
			}
			for j, x := range before {
				want := adamwScalar(float64(x), float64(g[off+j]), 5, 2e-3, o.Beta1, o.Beta2, o.Eps, wd)
				if d := math.Abs(float64(p.Slice(tc.param)[j]) - want); d > 1e-7+1e-6*math.Abs(want) {
					t.Fatalf("%s[%d] after 5 steps = %v, want %v", tc.param, j, p.Slice(tc.param)[j], want)
				}
			}
			if opt.StepCount() != 5 {
				t.Errorf("StepCount = %d, want 5", opt.StepCount())
			}
		})
	}
}

func TestAdamWGradClipAndState(t *testing.T) {
	cfg, _ := Preset("tiny")
	g := make([]float32, NewParams(cfg, 1).Count())
	for i := range g {
		g[i] = 1
	}
	// clipping to norm 1 equals feeding the pre-scaled gradient.
	clipped := NewParams(cfg, 1)
	o := DefaultAdamW()
	o.GradClip = 1
	a := NewAdamW(clipped, o)
	norm, _ := a.StepFlat(g, 0)
	if want := math.Sqrt(float64(len(g))); math.Abs(norm-want) > 1e-6*want {
		t.Errorf("gradient norm = %v, want %v", norm, want)
	}
	scaled := NewParams(cfg, 1)
	gs := make([]float32, len(g))
	for i := range gs {
		gs[i] = float32(1 / (norm + 1e-6))
	}
	NewAdamW(scaled, DefaultAdamW()).StepFlat(gs, 0)
	// Adam is nearly scale-invariant, so compare the moments, not only the weights.
	m1, _, _ := a.State()
	b := NewAdamW(NewParams(cfg, 1), DefaultAdamW())
	b.StepFlat(gs, 0)
	m2, _, _ := b.State()
	if d := testutil.MaxAbsDiff(m1, m2); d > 1e-9 {
		t.Errorf("first moment with clipping differs from pre-scaled gradients by %g", d)
	}
	// State round trip: a restored optimizer continues identically.
	c := NewAdamW(scaled.Clone(), DefaultAdamW())
	m, v, step := b.State()
	if err := c.SetState(m, v, step); err != nil {
		t.Fatal(err)
	}
	if err := c.SetState(m[:3], v, step); err == nil {
		t.Errorf("SetState with short moments succeeded")
	}
}

func TestAdamWStepDoesNotAllocate(t *testing.T) {
	m, cfg := tinyModel(t, 0, true)
	opt := NewAdamW(m.Params(), DefaultAdamW())
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 1)
	if _, err := m.Step(idx, tgt); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(5, func() { opt.Step(m, 0) }); n != 0 {
		t.Errorf("AdamW.Step allocates %v times per call, want 0", n)
	}
}

// TestAdamWSplitMatchesSerial: the update split over the worker pool (baby's
// 0.8M parameters are well above the split threshold) gives bitwise the
// serial update, step after step.
func TestAdamWSplitMatchesSerial(t *testing.T) {
	cfg, err := Preset("baby")
	if err != nil {
		t.Fatal(err)
	}
	run := func(limit int) *Params {
		prev := par.SetLimit(limit)
		defer par.SetLimit(prev)
		p := NewParams(cfg, 3)
		a := NewAdamW(p, DefaultAdamW())
		if limit > 1 && par.Workers() == 0 {
			t.Skip("one CPU: the pool has no workers, nothing to split")
		}
		if limit > 1 && a.split.Parts() < 2 {
			t.Fatal("the update of baby's parameters is not split")
		}
		grad := make([]float32, p.Count())
		for step := 0; step < 3; step++ {
			for i := range grad {
				grad[i] = float32((i*31+step*7)%97-48) * 1e-4
			}
			if _, err := a.StepFlat(grad, 1e-3); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	serial, split := run(1), run(par.MaxParts)
	for i, w := range serial.Data() {
		if split.Data()[i] != w {
			t.Fatalf("weight %d: split update %v, serial %v", i, split.Data()[i], w)
		}
	}
}

// TestAdamWShardsEqualTheWhole: shards of the parameters, each updated by
// its own optimizer with its own moments (ZeRO-1), give bitwise the whole
// optimizer's parameters after several steps, with clipping (the global
// norm given from every shard's sum) and weight decay across a shard's
// parameter boundaries.
func TestAdamWShardsEqualTheWhole(t *testing.T) {
	cfg, _ := Preset("tiny")
	cfg2 := DefaultAdamW()
	cfg2.GradClip = 0.5
	whole, sharded := NewParams(cfg, 1), NewParams(cfg, 1)
	n := whole.Count()
	cuts := []int{0, n / 3, n/3 + 17, n}
	full := NewAdamW(whole, cfg2)
	var shards []*AdamW
	for i := 0; i+1 < len(cuts); i++ {
		s, err := NewAdamWShard(sharded, cfg2, cuts[i], cuts[i+1])
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, s)
	}
	g := make([]float32, n)
	for step := range 4 {
		for i := range g {
			g[i] = float32((i*31+step*7)%101-50) / 500
		}
		if _, err := full.StepFlat(g, 1e-3); err != nil {
			t.Fatal(err)
		}
		var sq float64
		for _, v := range g {
			sq += float64(v) * float64(v)
		}
		for i, s := range shards {
			if _, err := s.StepShard(g[cuts[i]:cuts[i+1]], 1e-3, sq); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, w := range whole.Data() {
		if sharded.Data()[i] != w {
			t.Fatalf("element %d: sharded %v, whole %v", i, sharded.Data()[i], w)
		}
	}
	if got, want := shards[0].StateBytes()+shards[1].StateBytes()+shards[2].StateBytes(), full.StateBytes(); got != want {
		t.Errorf("shards hold %d bytes of moments, the whole %d", got, want)
	}
	if _, err := NewAdamWShard(whole, cfg2, 5, n+1); err == nil {
		t.Error("a shard past the end: no error")
	}
}

// TestAdamWStepReadsInPlace: Step, which reads the gradients where the
// model's step left them (c_attn's as three row blocks), gives bitwise the
// parameters and moments of StepFlat on Gradients' copy, step after step,
// and the same norm to float64 rounding: on one stream and on halves,
// under f32 and bf16, under a checkpointing schedule (whose recomputation
// reads c_attn's blocks again), and on baby, whose update is split across
// the pool with rows that cross parameters. Negative control: c_attn's q
// and k blocks read in each other's place change the parameters.
func TestAdamWStepReadsInPlace(t *testing.T) {
	for _, tc := range []struct {
		preset, policy string
		streams        Streams
		checkpointed   bool
	}{
		{"tiny", "f32", OneStream, false},
		{"tiny", "bf16", HalfBatches, false},
		{"tiny", "f32", OneStream, true},
		{"baby", "f32", OneStream, false},
	} {
		t.Run(fmt.Sprintf("%s/%s/checkpointed=%v", tc.preset, tc.policy, tc.checkpointed), func(t *testing.T) {
			cfg, _ := Preset(tc.preset)
			pol, err := precision.ParsePolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			opts := []ModelOption{WithPrecision(pol), WithStreams(tc.streams)}
			if tc.checkpointed {
				keep, err := CheckpointStepSchedule(cfg, []int{1})
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithStepSchedule(keep))
			}
			build := func() (*Model, *AdamW) {
				p := NewParams(cfg, 5)
				m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, opts...)
				if err != nil {
					t.Fatal(err)
				}
				return m, NewAdamW(p, DefaultAdamW())
			}
			inPlace, a := build()
			copied, b := build()
			swapped, c := build()
			for step := range 3 {
				idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, uint64(step))
				for _, m := range []*Model{inPlace, copied, swapped} {
					if _, err := m.Step(idx, tgt); err != nil {
						t.Fatal(err)
					}
				}
				na, err := a.Step(inPlace, 1e-3)
				if err != nil {
					t.Fatal(err)
				}
				g, err := b.Gradients(copied)
				if err != nil {
					t.Fatal(err)
				}
				nb, _ := b.StepFlat(g, 1e-3)
				if math.Abs(na-nb) > 1e-12*nb {
					t.Errorf("step %d: norm %v, StepFlat's %v", step, na, nb)
				}
				if err := c.gradParts(swapped); err != nil {
					t.Fatal(err)
				}
				i, ok := swapped.params.index["transformer.h.0.attn.c_attn.weight"]
				if parts := c.parts[i]; !ok || len(parts) != 3 {
					t.Fatalf("c_attn's gradient in %d pieces (parameter found: %v), want 3", len(c.parts[i]), ok)
				}
				c.parts[i][0], c.parts[i][1] = c.parts[i][1], c.parts[i][0]
				c.stepParts(1e-3)
			}
			ma, va, _ := a.State()
			mb, vb, _ := b.State()
			if !slices.Equal(inPlace.params.Data(), copied.params.Data()) || !slices.Equal(ma, mb) || !slices.Equal(va, vb) {
				t.Errorf("Step in place differs from StepFlat on the copy")
			}
			if slices.Equal(swapped.params.Data(), copied.params.Data()) {
				t.Errorf("control: c_attn's q and k blocks swapped left the parameters unchanged")
			}
		})
	}
}
