package models

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/par"
)

func tinyTrainConfig(t testing.TB, iters int) TrainConfig {
	t.Helper()
	mc, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return TrainConfig{Model: mc, Iters: iters, LR: 1e-3, Warmup: 2, EvalEvery: 2, EvalBatches: 2, Seed: 3}
}

func tinyCorpus(t testing.TB) *Dataset {
	t.Helper()
	spec := DefaultCorpusSpec()
	spec.Chars = 20_000
	d, err := MarkovCorpus(spec, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestResumeBitwise trains 6 steps straight, and 3 steps + save + resume +
// 3 steps: the losses, the validation history and the final parameters
// must be bitwise equal. Dropout is on, so the dropout counter matters too,
// and so are a non-default beta2 and gradient clipping.
func TestResumeBitwise(t *testing.T) {
	data := tinyCorpus(t)
	cfg := tinyTrainConfig(t, 6)
	cfg.Model.Dropout = 0.1
	cfg.Beta2, cfg.GradClip = 0.99, 0.5
	ctx := context.Background()

	straight, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := straight.Run(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}

	first, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Run(ctx, 3, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := first.Save(path); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Cfg.Beta2 != cfg.Beta2 || ck.Cfg.GradClip != cfg.GradClip {
		t.Errorf("checkpoint beta2, grad-clip = %v, %v; want %v, %v", ck.Cfg.Beta2, ck.Cfg.GradClip, cfg.Beta2, cfg.GradClip)
	}
	data2, err := ck.LoadData()
	if err == nil {
		t.Fatalf("LoadData of a 20k-char corpus named %q succeeded; the default corpus has another hash", ck.DataName)
	}
	resumed, err := ck.Resume(data)
	if err != nil {
		t.Fatal(err)
	}
	_ = data2
	if err := resumed.Run(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}

	if len(resumed.Losses) != 6 {
		t.Fatalf("resumed run has %d losses, want 6", len(resumed.Losses))
	}
	for i, l := range straight.Losses {
		if math.Float32bits(l) != math.Float32bits(resumed.Losses[i]) {
			t.Errorf("loss of step %d: straight %v (%08x), resumed %v (%08x)", i, l, math.Float32bits(l), resumed.Losses[i], math.Float32bits(resumed.Losses[i]))
		}
	}
	if len(straight.History) != len(resumed.History) {
		t.Fatalf("history: straight %d points, resumed %d", len(straight.History), len(resumed.History))
	}
	for i, p := range straight.History {
		q := resumed.History[i]
		if p.Step != q.Step || float32(p.Val) != float32(q.Val) {
			t.Errorf("history point %d: straight %+v, resumed %+v", i, p, q)
		}
	}
	for i, x := range straight.Params.Data() {
		if math.Float32bits(x) != math.Float32bits(resumed.Params.Data()[i]) {
			t.Fatalf("parameter %d: straight %v, resumed %v", i, x, resumed.Params.Data()[i])
		}
	}

	// Negative control: resuming without the optimizer state (fresh AdamW)
	// gives different losses, so the comparison above can fail.
	broken, err := ck.Resume(data)
	if err != nil {
		t.Fatal(err)
	}
	broken.Opt = NewAdamW(broken.Params, DefaultAdamW())
	if err := broken.Run(ctx, 6, nil); err != nil {
		t.Fatal(err)
	}
	if broken.Losses[4] == straight.Losses[4] && broken.Losses[5] == straight.Losses[5] {
		t.Error("resuming with fresh AdamW moments gave the same losses: the test cannot see optimizer state")
	}
}

func TestResumeRefusesOtherData(t *testing.T) {
	data := tinyCorpus(t)
	tr, err := NewTrainer(tinyTrainConfig(t, 4), data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.TrainStep(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	other := tinyCorpus(t)
	other.Train[0] = (other.Train[0] + 1) % int32(other.Tok.Vocab())
	if _, err := ck.Resume(other); !errors.Is(err, ErrBadData) {
		t.Errorf("Resume on changed data: error = %v, want ErrBadData", err)
	}
}

// TestTrainLossFalls: a few dozen steps of tiny on the Markov corpus bring
// the validation loss well below its start (about ln 24 = 3.18).
func TestTrainLossFalls(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds")
	}
	cfg := tinyTrainConfig(t, 60)
	cfg.LR = 1e-2
	cfg.Warmup = 5
	cfg.EvalEvery = 0
	cfg.EvalBatches = 8
	tr, err := NewTrainer(cfg, tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(context.Background(), cfg.Iters, nil); err != nil {
		t.Fatal(err)
	}
	first, last := tr.History[0].Val, tr.History[len(tr.History)-1].Val
	if !(last < first-0.3) {
		t.Errorf("val loss %.4f -> %.4f after %d steps, want a drop of at least 0.3", first, last, cfg.Iters)
	}
	if math.Abs(first-math.Log(24)) > 0.1 {
		t.Errorf("initial val loss %.4f, want about ln 24 = %.4f", first, math.Log(24))
	}
}

// TestTrainConfigOptimizer: beta2 and grad-clip reach AdamW, 0 meaning the
// reference's; bad values are refused, naming the setting.
func TestTrainConfigOptimizer(t *testing.T) {
	cfg := tinyTrainConfig(t, 6)
	if a := cfg.AdamW(); a.Beta2 != 0.95 || a.GradClip != 0 || a.LR != cfg.LR {
		t.Errorf("default: AdamW() = %+v, want beta2 0.95, no clipping, lr %v", a, cfg.LR)
	}
	cfg.Beta2, cfg.GradClip = 0.99, 1
	if a := cfg.AdamW(); a.Beta2 != 0.99 || a.GradClip != 1 {
		t.Errorf("AdamW() = %+v, want beta2 0.99, grad-clip 1", a)
	}
	for _, tc := range []struct {
		beta2, clip float64
		want        string
	}{
		{1, 0, "beta2"},
		{-0.1, 0, "beta2"},
		{math.NaN(), 0, "beta2"},
		{0.9, -1, "grad-clip"},
		{0.9, math.Inf(1), "grad-clip"},
	} {
		c := cfg
		c.Beta2, c.GradClip = tc.beta2, tc.clip
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(beta2 %v, grad-clip %v) = %v, want an error naming %s", tc.beta2, tc.clip, err, tc.want)
		}
	}
}

// TestTrainerStreams: a trainer with Streams set trains on the halved
// step (its model on two streams where the pool has a worker), and its
// losses agree with one stream's to float32 rounding of the halves' sums;
// a halved step with a step schedule is refused.
func TestTrainerStreams(t *testing.T) {
	losses := func(s Streams) []float32 {
		cfg := tinyTrainConfig(t, 4)
		cfg.Streams = s
		tr, err := NewTrainer(cfg, tinyCorpus(t))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		m, err := tr.Model()
		if err != nil {
			t.Fatal(err)
		}
		if c, ok := m.StreamChoice(); (s == HalfBatches) != (ok && c.Chosen == 2) && par.Workers() > 0 {
			t.Fatalf("streams %v: the model runs on %d streams", s, c.Chosen)
		}
		var out []float32
		for range cfg.Iters {
			l, err := tr.TrainStep()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	one, two := losses(OneStream), losses(HalfBatches)
	for i := range one {
		if d := math.Abs(float64(one[i] - two[i])); d > 1e-4 {
			t.Errorf("step %d: loss %v on one stream, %v halved", i, one[i], two[i])
		}
	}
	cfg := tinyTrainConfig(t, 1)
	cfg.Streams = HalfBatches
	s, err := CheckpointStepSchedule(cfg.Model, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Steps = &s
	tr, err := NewTrainer(cfg, tinyCorpus(t))
	if err == nil {
		_, err = tr.Model()
		tr.Close()
	}
	if !errors.Is(err, ErrConfig) {
		t.Errorf("a halved step with a schedule: %v, want ErrConfig", err)
	}
}
