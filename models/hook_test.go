package models

import (
	"slices"
	"testing"
)

// TestGradHookScalesTheUpdate: a hook that halves the gradients between
// the backward and AdamW gives the update AdamW makes of the halved
// gradients (computed apart, from the same start), and not the update of
// the gradients as they were (the negative control). The hook sees the
// final gradients and the parameters before the update.
func TestGradHookScalesTheUpdate(t *testing.T) {
	data := tinyCorpus(t)
	cfg := tinyTrainConfig(t, 3)
	cfg.GradClip = 0 // clipping would undo part of the scaling
	tr, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before := tr.Params.Clone()
	var seen []float32
	tr.GradHook = func(step int, grad []float32) error {
		if !slices.Equal(tr.Params.Data(), before.Data()) {
			t.Error("the hook runs after the parameters were updated")
		}
		m, err := tr.Model()
		if err != nil {
			return err
		}
		if w := m.Grad("transformer.wte.weight"); !slices.Equal(grad[:len(w)], w) {
			t.Error("the hook's gradient is not the model's")
		}
		seen = slices.Clone(grad)
		for i := range grad {
			grad[i] *= 0.5
		}
		return nil
	}
	if _, err := tr.TrainStep(); err != nil {
		t.Fatal(err)
	}
	lr := cfg.Schedule().At(0)
	apply := func(scale float32) []float32 {
		p := before.Clone()
		g := slices.Clone(seen)
		for i := range g {
			g[i] *= scale
		}
		if _, err := NewAdamW(p, cfg.AdamW()).StepFlat(g, lr); err != nil {
			t.Fatal(err)
		}
		return p.Data()
	}
	if want := apply(0.5); !slices.Equal(tr.Params.Data(), want) {
		t.Error("after the hook halved the gradients, the update is not AdamW's of the halved gradients")
	}
	if unscaled := apply(1); slices.Equal(tr.Params.Data(), unscaled) {
		t.Error("the update equals that of the unscaled gradients: the hook's change was ignored")
	}
}

// TestGradSchedule: every parameter's gradient has its moment in the
// schedule, the head's before the first layer's, and at that moment its
// value is already the one the step ends with.
func TestGradSchedule(t *testing.T) {
	m, cfg := tinyModel(t, 0.1, true)
	sched, err := m.GradSchedule()
	if err != nil {
		t.Fatal(err)
	}
	at := map[string]int{}
	for _, r := range sched {
		at[r.Name] = r.Step
	}
	if len(at) != len(m.Params().Names()) {
		t.Fatalf("schedule has %d parameters, want %d", len(at), len(m.Params().Names()))
	}
	if at["transformer.ln_f.weight"] >= at["transformer.h.0.mlp.c_fc.weight"] {
		t.Errorf("ln_f's gradient ready at step %d, h.0's c_fc at %d: want the head first", at["transformer.ln_f.weight"], at["transformer.h.0.mlp.c_fc.weight"])
	}
	early := map[string][]float32{}
	if err := m.OnGradReady(func(name string) { early[name] = slices.Clone(m.Grad(name)) }); err != nil {
		t.Fatal(err)
	}
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 4)
	if _, err := m.Step(idx, tgt); err != nil {
		t.Fatal(err)
	}
	for _, name := range m.Params().Names() {
		if !slices.Equal(early[name], m.Grad(name)) {
			t.Errorf("%s: the gradient read when ready differs from the step's final one", name)
		}
	}
	tape, _ := NewModel(cfg, m.Params(), cfg.Batch, cfg.Block, true, WithTapeMachine())
	defer tape.Close()
	if _, err := tape.GradSchedule(); err == nil {
		t.Error("GradSchedule on the TapeMachine: no error")
	}
}
