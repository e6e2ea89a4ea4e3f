package models

import (
	"strings"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/precision"
)

// TestSchedulesGiveTheSameStep: every schedule of passes (plain, boundary
// checkpoints, Megatron's selective recomputation, both) computes the
// plain model's loss and gradients bitwise, with dropout on; the
// recomputing ones plan a smaller arena.
func TestSchedulesGiveTheSameStep(t *testing.T) {
	for _, pol := range []string{"f32", "bf16", "fp16"} {
		t.Run(pol, func(t *testing.T) {
			if pol != "f32" {
				testutil.SkipEmulated(t, "the 16-bit policies run natively; emulated, f32 takes every schedule and experiments/lab's test trains bf16 checkpointed to the same losses")
			}
			schedulesGiveTheSameStep(t, policy(t, pol))
		})
	}
}

func schedulesGiveTheSameStep(t *testing.T, pol precision.Policy) {
	cfg, _ := Preset("small")
	cfg.Layers, cfg.Dropout = 4, 0.1
	if testutil.Trimmed() { // emulated -short: 2 sequences, not 16 (natively the full batch)
		cfg.Batch = 2
	}
	p := NewParams(cfg, 3)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 9)
	ref, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(pol))
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
	selective := plain.Selective(cfg)
	both := every2.Selective(cfg)
	peaks := map[string]int64{}
	for _, tc := range []struct {
		name string
		s    StepSchedule
	}{{"plain", plain}, {"every 2", every2}, {"every layer", everyLayer}, {"selective", selective}, {"every 2 + selective", both}} {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(pol), WithStepSchedule(tc.s))
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
			if d := testutil.MaxAbsDiff(m.Grad(name), ref.Grad(name)); d != 0 {
				t.Errorf("%s: gradient of %s differs by %g", tc.name, name, d)
			}
		}
		if err := m.Arena().Verify(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		// a selective forward runs each core fused, when its values stay float32
		fused := 0
		for _, n := range m.g.AllNodes() {
			if _, runs := m.Arena().StepOf(n); runs && strings.HasPrefix(n.Op().String(), "CausalAttend") {
				fused++
			}
		}
		want := 0
		for _, pass := range tc.s.Passes {
			if pass.Selective && pol.Name == "f32" { // an attention half's forward, first or again
				want++
			}
		}
		if fused != want {
			t.Errorf("%s: %d fused attention cores run, want %d", tc.name, fused, want)
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
		t.Error("keep layer 5 of 2: no error")
	}
}

// TestStatefulRNG: with masks from a sequential generator, a checkpointed
// step equals the plain one only when the generator's state is stashed
// and restored around each recomputation; then the stream after the step
// is the plain step's too. Without the restore the recomputation draws
// other masks: different gradients and a stream moved on (the negative
// control).
func TestStatefulRNG(t *testing.T) {
	cfg, _ := Preset("tiny")
	cfg.Dropout = 0.2
	p := NewParams(cfg, 3)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 2)
	ck, err := CheckpointStepSchedule(cfg, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	run := func(s StepSchedule, preserve bool) (*Model, float32) {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStepSchedule(s), WithRNG(RNGOptions{Kind: Stateful, Preserve: preserve}))
		if err != nil {
			t.Fatal(err)
		}
		m.SetDropoutSeed(5)
		loss, err := m.Step(idx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		return m, loss
	}
	plain, lp := run(PlainStepSchedule(cfg), true)
	defer plain.Close()
	kept, lk := run(ck, true)
	defer kept.Close()
	naive, ln := run(ck, false)
	defer naive.Close()
	if lk != lp || ln != lp {
		t.Errorf("losses %v (plain), %v (restored), %v (not restored): the first forward must be the same", lp, lk, ln)
	}
	worst := 0.0
	for _, name := range p.Names() {
		if d := testutil.MaxAbsDiff(kept.Grad(name), plain.Grad(name)); d != 0 {
			t.Errorf("restored: %s differs by %g", name, d)
		}
		worst = max(worst, testutil.MaxAbsDiff(naive.Grad(name), plain.Grad(name)))
	}
	if worst == 0 {
		t.Error("without the restore the gradients are the plain step's: the recomputation did not draw new masks")
	}
	if string(kept.RNGState()) != string(plain.RNGState()) {
		t.Error("restored: the stream after the step is not the plain step's")
	}
	if string(naive.RNGState()) == string(plain.RNGState()) {
		t.Error("not restored: the stream after the step is the plain step's")
	}
	t.Logf("without the restore: max |gradient difference| %g", worst)
}

// TestRunningMeanGuard: replaying a stateful update twice changes the
// program. A checkpointed step that recomputes the segment holding a
// running mean updates it twice, unless the recomputation is guarded;
// guarded, the mean is the plain step's to the bit.
func TestRunningMeanGuard(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 3)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 2)
	ck, err := CheckpointStepSchedule(cfg, []int{1}) // recomputes layer 0
	if err != nil {
		t.Fatal(err)
	}
	run := func(s StepSchedule, guard bool) RunningMean {
		stat := &RunningMean{Momentum: 0.1}
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStepSchedule(s), WithRunningMean(stat, guard))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for range 3 {
			if _, err := m.Step(idx, tgt); err != nil {
				t.Fatal(err)
			}
		}
		return *stat
	}
	plain := run(PlainStepSchedule(cfg), true)
	guarded := run(ck, true)
	naive := run(ck, false)
	if plain.Updates != 3 || guarded != plain {
		t.Errorf("guarded %+v, plain %+v: want the same mean after 3 updates", guarded, plain)
	}
	if naive.Updates != 6 || naive.Mean == plain.Mean {
		t.Errorf("unguarded %+v: want 6 updates and another mean than %v", naive, plain.Mean)
	}
}

// TestSelectiveWorkCounted: the work a selective backward runs again is
// the attention cores' ops, under a precision policy too (plus the casts
// of what they store): once only the casts were counted under bf16.
func TestSelectiveWorkCounted(t *testing.T) {
	cfg, _ := Preset("small")
	cfg.Dropout = 0.1
	p := NewParams(cfg, 3)
	sel := PlainStepSchedule(cfg).Selective(cfg)
	share := map[string]float64{}
	for _, pol := range []string{"f32", "bf16"} {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(policy(t, pol)), WithStepSchedule(sel))
		if err != nil {
			t.Fatal(err)
		}
		fwd, again := m.Work()
		m.Close()
		share[pol] = again / fwd
	}
	if !(share["f32"] > 0.01) || share["bf16"] < share["f32"] {
		t.Errorf("selective recomputation's share of a forward: f32 %.4f, bf16 %.4f; want f32's above 1%% and bf16's at least f32's", share["f32"], share["bf16"])
	}
}
