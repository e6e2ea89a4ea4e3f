package models

import (
	"fmt"
	"testing"
)

// TestSchedulesGiveTheSameStep: every schedule of passes (plain, boundary
// checkpoints, Megatron's selective recomputation, both) computes the
// plain model's loss and gradients bitwise, with dropout on; the
// recomputing ones plan a smaller arena.
func TestSchedulesGiveTheSameStep(t *testing.T) {
	cfg, _ := Preset("small")
	cfg.Layers, cfg.Dropout = 4, 0.1
	p := NewParams(cfg, 3)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 9)
	ref, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ref.SetDropoutSeed(4)
	want, err := ref.Step(idx, tgt)
	if err != nil {
		t.Fatal(err)
	}
	plain := PlainStepSchedule(cfg)
	every2, err := CheckpointStepSchedule(cfg, []int{2})
	if err != nil {
		t.Fatal(err)
	}
	everyLayer, err := CheckpointStepSchedule(cfg, []int{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	selective := plain
	selective.Selective = true
	both := every2
	both.Selective = true
	peaks := map[string]int64{}
	for _, tc := range []struct {
		name string
		s    StepSchedule
	}{{"plain", plain}, {"every 2", every2}, {"every layer", everyLayer}, {"selective", selective}, {"every 2 + selective", both}} {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStepSchedule(tc.s))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		m.SetDropoutSeed(4)
		got, err := m.Step(idx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: loss %v, plain model %v", tc.name, got, want)
		}
		for _, name := range p.Names() {
			if d := maxAbsDiff(m.Grad(name), ref.Grad(name)); d != 0 {
				t.Errorf("%s: gradient of %s differs by %g", tc.name, name, d)
			}
		}
		if err := m.Arena().Verify(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		peaks[tc.name] = m.Arena().Stats().ArenaBytes
		m.Close()
	}
	t.Logf("planned arena bytes: %v", peaks)
	for _, name := range []string{"every 2", "selective", "every 2 + selective"} {
		if peaks[name] >= peaks["plain"] {
			t.Errorf("%s plans %d bytes, the plain step %d: no saving", name, peaks[name], peaks["plain"])
		}
	}
}

// TestStepScheduleRejects: schedules that do not compute the step are
// refused with the pass at fault.
func TestStepScheduleRejects(t *testing.T) {
	cfg, _ := Preset("tiny") // 6 segments
	for _, tc := range []StepSchedule{
		{Passes: []Pass{{Seg: 0}, {Seg: 1}, {Seg: 2}, {Seg: 3}, {Seg: 4}, {Seg: 5}, {Seg: 4, Backward: true}}},
		{Passes: []Pass{{Seg: 1}}},
		{Passes: []Pass{{Seg: 0}, {Seg: 0}}},
		{Passes: []Pass{{Seg: 0}, {Seg: 1}, {Seg: 2}, {Seg: 3}, {Seg: 4}, {Seg: 5}}},
		{Passes: []Pass{{Seg: 6}}},
	} {
		if err := tc.Validate(cfg); err == nil {
			t.Errorf("%v: no error", tc)
		}
	}
	if _, err := CheckpointStepSchedule(cfg, []int{5}); err == nil {
		t.Error(fmt.Sprint("keep layer 5 of 2: no error"))
	}
}
