package models

import (
	"testing"
)

// TestArenaMatchesTapeMachine trains the same model twice, on the arena
// executor (the default) and on gorgonia's TapeMachine, with dropout and
// AdamW: every loss and every weight must be bitwise equal.
func TestArenaMatchesTapeMachine(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dropout = 0.1
	run := func(opts ...ModelOption) ([]float32, *Params) {
		p := NewParams(cfg, 5)
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return trainSteps(t, m, p, cfg, 4), p
	}
	gotLoss, gotP := run()
	wantLoss, wantP := run(WithTapeMachine())
	for i := range wantLoss {
		if gotLoss[i] != wantLoss[i] {
			t.Fatalf("step %d: arena loss %v, TapeMachine %v", i, gotLoss[i], wantLoss[i])
		}
	}
	for i, w := range wantP.Data() {
		if gotP.Data()[i] != w {
			t.Fatalf("weight %d after 4 AdamW steps: arena %v, TapeMachine %v", i, gotP.Data()[i], w)
		}
	}
}
