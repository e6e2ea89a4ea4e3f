package models

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// halvesCfg is tiny with four sequences a batch (two a half) and dropout.
func halvesCfg(t *testing.T) Config {
	t.Helper()
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Batch, cfg.Dropout = 4, 0.1
	return cfg
}

// fixedBatch is the tokens and targets of step of a fixed sequence of
// batches of cfg's shape.
func fixedBatch(cfg Config, step int) (idx, tgt []int32) {
	idx = make([]int32, cfg.Batch*cfg.Block)
	tgt = make([]int32, len(idx))
	for i := range idx {
		idx[i] = int32((i*7 + step*3) % cfg.Vocab)
		tgt[i] = int32((i*5 + step) % cfg.Vocab)
	}
	return idx, tgt
}

// trainSteps trains m for steps steps of fixedBatch with AdamW (lr 0:
// its default) and returns the losses.
func trainSteps(t *testing.T, m *Model, p *Params, cfg Config, steps int) []float32 {
	t.Helper()
	opt := NewAdamW(p, DefaultAdamW())
	var losses []float32
	for step := range steps {
		idx, tgt := fixedBatch(cfg, step)
		loss, err := m.Step(idx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
		if _, err := opt.Step(m, 0); err != nil {
			t.Fatal(err)
		}
	}
	return losses
}

// TestHalfBatchesMatchWholeBatch runs one training step of the whole
// batch and of its two halves (HalfBatches) on the same parameters, with
// dropout, under f32 and bf16: every logit must be bitwise the whole
// batch's (the second half's dropout masks are the whole batch's where its
// rows sit: drawn from its first sequence's elements on, not from 0, they
// would differ), and the loss and every gradient must agree to float32
// rounding of the halves' sums.
func TestHalfBatchesMatchWholeBatch(t *testing.T) {
	cfg := halvesCfg(t)
	bf16, err := precision.ParsePolicy("bf16")
	if err != nil {
		t.Fatal(err)
	}
	// a gradient's largest difference, relative to its largest value (the
	// tiny step's: 2.7e-7 under f32, 9.4e-8 under bf16, whose weights'
	// gradients are float32 sums of products of bf16 values too)
	const tol = 1e-6
	for _, tc := range []struct {
		name string
		opts []ModelOption
	}{
		{"f32", nil},
		{"bf16", []ModelOption{WithPrecision(bf16)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParams(cfg, 3)
			whole, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer whole.Close()
			halves, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, append(tc.opts, WithStreams(HalfBatches))...)
			if err != nil {
				t.Fatal(err)
			}
			defer halves.Close()
			idx, tgt := fixedBatch(cfg, 0)
			lw, err := whole.Step(idx, tgt)
			if err != nil {
				t.Fatal(err)
			}
			lh, err := halves.Step(idx, tgt)
			if err != nil {
				t.Fatal(err)
			}
			if d := testutil.MaxAbsDiff(whole.Logits(), halves.Logits()); d != 0 || len(halves.Logits()) != len(whole.Logits()) {
				t.Errorf("logits differ by %g (%d against %d values)", d, len(halves.Logits()), len(whole.Logits()))
			}
			if math.Abs(float64(lh-lw)) > 1e-6*math.Abs(float64(lw)) {
				t.Errorf("loss %v, whole batch %v", lh, lw)
			}
			for _, name := range p.Names() {
				gw, gh := whole.Grad(name), halves.Grad(name)
				scale := 0.0
				for _, v := range gw {
					scale = math.Max(scale, math.Abs(float64(v)))
				}
				if d := testutil.MaxAbsDiff(gw, gh); len(gh) != len(gw) || d > tol*scale {
					t.Errorf("%s: gradient differs by %g (largest %g)", name, d, scale)
				}
			}
		})
	}
}

// TestHalfBatchesStreams checks the halved step's placement and results:
// the scheduler put every op of one half on its own stream (half 0 on
// stream 0), and the program gives the same bits on one stream as on the
// two (losses and weights over steps with AdamW).
func TestHalfBatchesStreams(t *testing.T) {
	cfg := halvesCfg(t)
	train := func(one bool) ([]float32, []float32, *Model) {
		p := NewParams(cfg, 5)
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStreams(HalfBatches))
		if err != nil {
			t.Fatal(err)
		}
		if one {
			if err := m.Arena().SetStreams(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		}
		return trainSteps(t, m, p, cfg, 4), append([]float32(nil), p.Data()...), m
	}
	twoLoss, twoP, m := train(false)
	defer m.Close()
	oneLoss, oneP, one := train(true)
	defer one.Close()
	for i := range twoLoss {
		if twoLoss[i] != oneLoss[i] {
			t.Errorf("step %d: loss %v on two streams, %v on one", i, twoLoss[i], oneLoss[i])
		}
	}
	if d := testutil.MaxAbsDiff(twoP, oneP); d != 0 {
		t.Errorf("weights differ by %g between one stream and two", d)
	}
	c, ok := m.StreamChoice()
	if !ok {
		t.Skip("one usable CPU: the halved step runs on one stream")
	}
	pins := m.halfPins(m.Arena())
	var pinned [2]int
	for i, s := range c.Assignment.Streams {
		if pins[i] >= 0 {
			pinned[pins[i]]++
			if s != pins[i] {
				t.Errorf("step %d of half %d on stream %d", i, pins[i], s)
			}
		}
	}
	// the halves' ops are the same but for the partial sums of gradients
	// read by both (a weight's contributions are added in the order the
	// backward meets them)
	if pinned[0] < 10 || pinned[1] < 10 || pinned[0] > pinned[1]+pinned[1]/10 || pinned[1] > pinned[0]+pinned[0]/10 {
		t.Errorf("steps of each half: %v, want two counts of many steps within a tenth of each other", pinned)
	}
}

// TestHalfBatchesRefused: a halved step needs a training model of an
// even batch without a step schedule.
func TestHalfBatchesRefused(t *testing.T) {
	cfg := halvesCfg(t)
	keep, err := CheckpointStepSchedule(cfg, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	p := NewParams(cfg, 1)
	for _, tc := range []struct {
		name  string
		B     int
		train bool
		opts  []ModelOption
	}{
		{"odd batch", 3, true, nil},
		{"evaluation", 4, false, nil},
		{"schedule", 4, true, []ModelOption{WithStepSchedule(keep)}},
		{"tape", 4, true, []ModelOption{WithTapeMachine()}},
	} {
		_, err := NewModel(cfg, p, tc.B, cfg.Block, tc.train, append(tc.opts, WithStreams(HalfBatches))...)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", tc.name, err)
		}
	}
}

// TestHalfBatchesSameEveryBuild: the ops the halves share are placed on
// the cost model's costs, not the clock, so every build of baby's halved
// step (f32 and bf16) makes the same streams and the same arena (on
// measured costs the loss's add moved between the streams, and baby's f32
// arena between 35.4 and 46.5 MB, in 3 of 8 builds).
func TestHalfBatchesSameEveryBuild(t *testing.T) {
	cfg, err := Preset("baby")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"f32", "bf16"} {
		pol, err := precision.ParsePolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		var first arena.StreamChoice
		for k := range 3 {
			m, err := NewModel(cfg, NewParams(cfg, 1), cfg.Batch, cfg.Block, true, WithPrecision(pol), WithStreams(HalfBatches))
			if err != nil {
				t.Fatal(err)
			}
			c, ok := m.StreamChoice()
			m.Close()
			if !ok {
				t.Skip("one usable CPU: the halved step runs on one stream")
			}
			if k == 0 {
				first = c
				continue
			}
			if !slices.Equal(c.Assignment.Streams, first.Assignment.Streams) || c.ArenaTwo != first.ArenaTwo {
				t.Errorf("%s: build %d put %d ops on stream 1 in an arena of %d bytes, the first %d in %d", name, k, c.Steps[1], c.ArenaTwo, first.Steps[1], first.ArenaTwo)
			}
		}
	}
}
