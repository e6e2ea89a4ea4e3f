package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"gptlab/precision"
)

// TrainConfig holds the settings of a training run besides the model's
// shape. Everything random in the run derives from Seed: the initial
// parameters, the training batches, the validation batches, dropout.
type TrainConfig struct {
	Model       Config
	Iters       int     // steps of the schedule (the run's length)
	LR          float64 // peak learning rate
	Warmup      int     // linear warmup steps
	EvalEvery   int     // validate every this many steps, and at the end; 0: at the end only
	EvalBatches int     // validation batches averaged per evaluation (always the same ones)
	Beta2       float64 // AdamW's second-moment decay in (0, 1); a trainer stores DefaultBeta2 for 0
	GradClip    float64 // clip the global gradient norm to this; 0 disables
	Seed        int64
	// Steps, when set, builds the training step pass by pass (gradient
	// checkpointing, WithStepSchedule): the same losses and gradients to
	// the bit, another memory and time. It is not saved in checkpoints.
	Steps *StepSchedule
	// Precision is the precision policy (package precision): f32 (the zero
	// Policy too), bf16, fp16 (with dynamic loss scaling) or fp16-noscale.
	// The master weights and AdamW's moments are float32 under every
	// policy; checkpoints keep its name.
	Precision precision.Policy
	// Streams is how the training step runs on the cores (WithStreams):
	// OneStream, the zero value, each op split across them; HalfBatches,
	// the batch's two halves on two streams (an even batch, no Steps), as
	// `bench train` runs it by default. The evaluation model runs on one.
	// It is not saved in checkpoints.
	Streams Streams
}

// DefaultBeta2 is the reference's AdamW second-moment decay.
const DefaultBeta2 = 0.95

// withDefaults fills the settings left at zero that have a default, so a
// trainer's Cfg (and every checkpoint it writes) holds the values used.
func (c TrainConfig) withDefaults() TrainConfig {
	if c.Beta2 == 0 {
		c.Beta2 = DefaultBeta2
	}
	if c.Precision.Name == "" {
		c.Precision = precision.F32Policy
	}
	return c
}

// Validate reports the first unusable setting.
func (c TrainConfig) Validate() error {
	if err := c.Model.Validate(); err != nil {
		return err
	}
	switch {
	case c.Iters < 1:
		return fmt.Errorf("%w: iters = %d, want >= 1", ErrConfig, c.Iters)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("%w: lr = %v, want > 0", ErrConfig, c.LR)
	case c.Warmup < 0:
		return fmt.Errorf("%w: warmup = %d, want >= 0", ErrConfig, c.Warmup)
	case c.EvalEvery < 0:
		return fmt.Errorf("%w: eval-every = %d, want >= 0", ErrConfig, c.EvalEvery)
	case c.EvalBatches < 1:
		return fmt.Errorf("%w: eval-batches = %d, want >= 1", ErrConfig, c.EvalBatches)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("%w: beta2 = %v, want in (0, 1) (0: DefaultBeta2)", ErrConfig, c.Beta2)
	case !(c.GradClip >= 0) || math.IsInf(c.GradClip, 0):
		return fmt.Errorf("%w: grad-clip = %v, want >= 0 (0: no clipping)", ErrConfig, c.GradClip)
	}
	return nil
}

// AdamW is the run's optimizer configuration: the reference's, with the
// run's LR, Beta2 and GradClip.
func (c TrainConfig) AdamW() AdamWConfig {
	a := DefaultAdamW()
	a.LR = c.LR
	a.Beta2 = c.withDefaults().Beta2
	a.GradClip = c.GradClip
	return a
}

// Schedule is the run's learning-rate schedule.
func (c TrainConfig) Schedule() Schedule {
	return Schedule{LR: c.LR, Warmup: c.Warmup, Iters: c.Iters}
}

// Point is one validation of the training history.
type Point struct {
	Step  int     // steps done when measured
	Train float64 // mean training loss of the steps since the previous point (NaN at step 0)
	Val   float64 // mean loss over the validation batches
}

// Trainer runs the training loop of one model on one dataset. A Trainer
// saved with Save and restored with Resume continues exactly as if it had
// never stopped: parameters, AdamW moments and step, the position of the
// batch stream and the loss history are in the checkpoint, and the dropout
// masks follow from the seed and the step.
type Trainer struct {
	Cfg     TrainConfig
	Data    *Dataset
	Params  *Params
	Opt     *AdamW
	Losses  []float32 // training loss of every step so far
	History []Point   // validations so far

	// GradHook, when set, runs in every TrainStep between the backward and
	// the optimizer: the gradients of the step are final and laid out like
	// Params.Data in grad, the update is not applied yet. It may change
	// grad in place (scale it, all-reduce it across processes); AdamW then
	// applies what it holds. An error stops the step before the update.
	// Under dynamic loss scaling grad holds the scaled gradients (the
	// scale is LossScaler().Scale()); they are unscaled and checked after
	// the hook, so processes that all-reduce them skip a step together.
	GradHook func(step int, grad []float32) error

	step    int               // steps done
	opts    []ModelOption     // the policy's (WithPrecision)
	scaler  *precision.Scaler // the policy's dynamic loss scaling, or nil
	model   *Model
	eval    *Model
	batches *Batcher
	idx     []int32 // (B, T)
	tgt     []int32 // (B, T)
}

// NewTrainer makes a trainer with fresh parameters from cfg.Seed. The
// model's vocabulary is the dataset's.
func NewTrainer(cfg TrainConfig, data *Dataset) (*Trainer, error) {
	cfg.Model.Vocab = data.Tok.Vocab()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, err := newTrainer(cfg, data, NewParams(cfg.Model, cfg.Seed))
	if err != nil {
		return nil, err
	}
	if err := t.ensureModel(); err != nil {
		return nil, err
	}
	return t, nil
}

// NewTrainerFrom makes a trainer that starts from a copy of p (for
// evaluating or fine-tuning a saved model); cfg.Model must match p's shape
// and the data's vocabulary.
func NewTrainerFrom(cfg TrainConfig, data *Dataset, p *Params) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if v := data.Tok.Vocab(); v != cfg.Model.Vocab {
		return nil, fmt.Errorf("%w: data has %d characters, model vocabulary %d", ErrBadData, v, cfg.Model.Vocab)
	}
	return newTrainer(cfg, data, p.Clone())
}

// newTrainer makes a trainer on p. The training graph is compiled by
// ensureModel (NewTrainer and Resume do it at once, so that the first
// step's time is a step's; an evaluation-only trainer never does).
func newTrainer(cfg TrainConfig, data *Dataset, p *Params) (*Trainer, error) {
	cfg = cfg.withDefaults()
	mc := cfg.Model
	if len(data.Train) < mc.Block+1 || len(data.Val) < mc.Block+1 {
		return nil, fmt.Errorf("%w: splits of %d and %d tokens cannot hold a window of block %d", ErrBadData, len(data.Train), len(data.Val), mc.Block)
	}
	policy := cfg.Precision
	opts := []ModelOption{WithPrecision(policy)}
	var scaler *precision.Scaler
	var err error
	if policy.LossScaling {
		if scaler, err = precision.NewScaler(precision.DefaultScalerConfig()); err != nil {
			return nil, err
		}
	}
	eval, err := NewModel(mc, p, mc.Batch, mc.Block, false, opts...) // validation under the policy too
	if err != nil {
		return nil, err
	}
	bt, err := NewBatcher(data.Train, mc.Batch, mc.Block, uint64(cfg.Seed), StreamTrain)
	if err != nil {
		return nil, err
	}
	n := mc.Batch * mc.Block
	return &Trainer{
		Cfg: cfg, Data: data, Params: p, Opt: NewAdamW(p, cfg.AdamW()),
		eval: eval, batches: bt, opts: opts, scaler: scaler,
		idx: make([]int32, n), tgt: make([]int32, n),
	}, nil
}

// ensureModel compiles the training graph (forward and backward) once.
func (t *Trainer) ensureModel() error {
	if t.model != nil {
		return nil
	}
	mc := t.Cfg.Model
	opts := t.opts
	if t.Cfg.Steps != nil {
		opts = append(slices.Clip(opts), WithStepSchedule(*t.Cfg.Steps))
	}
	if t.Cfg.Streams != OneStream {
		opts = append(slices.Clip(opts), WithStreams(t.Cfg.Streams))
	}
	m, err := NewModel(mc, t.Params, mc.Batch, mc.Block, true, opts...)
	if err != nil {
		return err
	}
	m.SetDropoutSeed(t.Cfg.Seed)
	t.model = m
	return nil
}

// Model is the compiled training model (for its gradient schedule and
// OnGradReady), compiled now if it was not yet.
func (t *Trainer) Model() (*Model, error) {
	if err := t.ensureModel(); err != nil {
		return nil, err
	}
	return t.model, nil
}

// Close releases the compiled graphs.
func (t *Trainer) Close() error {
	var err error
	for _, m := range []*Model{t.model, t.eval} {
		if m != nil {
			err = errors.Join(err, m.Close())
		}
	}
	return err
}

// StepsDone is the number of training steps taken so far.
func (t *Trainer) StepsDone() int { return t.step }

// LossScaler is the run's dynamic loss scaling (GradScaler's defaults), or
// nil for a policy without it.
func (t *Trainer) LossScaler() *precision.Scaler { return t.scaler }

// TrainStep draws the next batch, runs forward and backward, calls
// GradHook, and applies one AdamW update at the schedule's learning rate.
// It returns the loss. Under dynamic loss scaling the backward is seeded
// with the scale, the gradients are unscaled after GradHook and checked,
// and a step with an Inf or NaN among them applies no update (AdamW's
// step count stays; the schedule moves on) and halves the scale.
func (t *Trainer) TrainStep() (float32, error) {
	if err := t.ensureModel(); err != nil {
		return 0, err
	}
	t.batches.Next(t.idx, t.tgt)
	t.model.SetDropoutKey(int64(t.step))
	if t.scaler != nil {
		if err := t.model.SetLossScale(t.scaler.Scale()); err != nil {
			return 0, err
		}
	}
	loss, err := t.model.Step(t.idx, t.tgt)
	if err != nil {
		return 0, fmt.Errorf("step %d: %w", t.step, err)
	}
	if err := t.update(); err != nil {
		return 0, fmt.Errorf("step %d: %w", t.step, err)
	}
	t.step++
	t.Losses = append(t.Losses, loss)
	return loss, nil
}

// update applies the step's AdamW update: with nothing to read or change
// the gradients first (no GradHook, no loss scaling), AdamW.Step reads
// them where the step left them; else on Gradients' copy, after the hook
// and the scaler's unscaling and check.
func (t *Trainer) update() error {
	lr := t.Cfg.Schedule().At(t.step)
	if t.GradHook == nil && t.scaler == nil {
		_, err := t.Opt.Step(t.model, lr)
		return err
	}
	grad, err := t.Opt.Gradients(t.model)
	if err != nil {
		return err
	}
	if t.GradHook != nil {
		if err := t.GradHook(t.step, grad); err != nil {
			return fmt.Errorf("gradient hook: %w", err)
		}
	}
	if t.scaler != nil {
		t.scaler.Unscale(grad)
		if t.scaler.Update() {
			return nil // an Inf or NaN: no update
		}
	}
	_, err = t.Opt.StepFlat(grad, lr)
	return err
}

// ValBatches calls f with each of the fixed validation batches, (B, T)
// inputs and targets. They depend on the seed only, so every evaluation
// of a run (and of its resumption) sees the same tokens.
func (t *Trainer) ValBatches(f func(idx, targets []int32) error) error {
	return ValBatches(t.Data, t.Cfg.Model, t.Cfg.Seed, t.Cfg.EvalBatches, f)
}

// ValBatches calls f with each of the n validation batches of a run of
// seed on data, (mc.Batch, mc.Block) inputs and targets: the batches
// Trainer.ValBatches gives, for a model evaluated apart from its trainer
// (an int8 one).
func ValBatches(data *Dataset, mc Config, seed int64, n int, f func(idx, targets []int32) error) error {
	vb, err := NewBatcher(data.Val, mc.Batch, mc.Block, uint64(seed), StreamVal)
	if err != nil {
		return err
	}
	idx, tgt := make([]int32, mc.Batch*mc.Block), make([]int32, mc.Batch*mc.Block)
	for range n {
		vb.Next(idx, tgt)
		if err := f(idx, tgt); err != nil {
			return err
		}
	}
	return nil
}

// Evaluate is the mean loss over the validation batches (no dropout).
func (t *Trainer) Evaluate() (float64, error) {
	losses, err := t.ValLosses()
	if err != nil {
		return 0, err
	}
	return mean(losses), nil
}

// ValLosses is the model's loss on each validation batch.
func (t *Trainer) ValLosses() ([]float64, error) {
	var out []float64
	err := t.ValBatches(func(idx, tgt []int32) error {
		l, err := t.eval.Step(idx, tgt)
		out = append(out, float64(l))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return out, nil
}

// OracleLosses is the ideal model's loss on each validation batch (each
// window scored by the source's true probabilities, with no context from
// before the window), or nil for data without a known source.
func (t *Trainer) OracleLosses() []float64 {
	return OracleLosses(t.Data, t.Cfg.Model, t.Cfg.Seed, t.Cfg.EvalBatches)
}

// OracleLosses is Trainer.OracleLosses for the n validation batches of a
// run of seed on data (ValBatches), or nil for data without a known
// source.
func OracleLosses(data *Dataset, mc Config, seed int64, n int) []float64 {
	src := data.Source
	if src == nil {
		return nil
	}
	var out []float64
	T := mc.Block
	_ = ValBatches(data, mc, seed, n, func(idx, tgt []int32) error {
		sum := 0.0
		for r := 0; r < len(idx); r += T {
			sum += src.WindowLoss(idx[r:r+T], tgt[r:r+T])
		}
		out = append(out, sum/float64(len(idx)/T))
		return nil
	})
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// StepInfo describes one finished step for a progress display.
type StepInfo struct {
	Step     int           // steps done (1-based count)
	Loss     float32       // this step's training loss
	LR       float64       // learning rate used
	Duration time.Duration // wall time of the step
	Val      float64       // validation loss when this step ended with one, else NaN
	Scale    float32       // the loss scale the step's backward was seeded with (1 without loss scaling)
	Skipped  bool          // the update was skipped: a gradient was not finite
}

// Run trains until StepsDone() == until (at most Cfg.Iters), validating
// at step 0 of a fresh run, every EvalEvery steps and at the end of the
// schedule. onStep (may be nil) sees every step. A cancelled ctx stops the
// run between steps with ctx's error; the trainer stays consistent and can
// be saved.
func (t *Trainer) Run(ctx context.Context, until int, onStep func(StepInfo)) error {
	until = min(until, t.Cfg.Iters)
	if t.step == 0 && len(t.History) == 0 {
		v, err := t.Evaluate()
		if err != nil {
			return err
		}
		t.History = append(t.History, Point{Step: 0, Train: math.NaN(), Val: v})
	}
	for t.step < until {
		if err := ctx.Err(); err != nil {
			return err
		}
		lr := t.Cfg.Schedule().At(t.step)
		scale, skipped := float32(1), 0
		if t.scaler != nil {
			scale, skipped = t.scaler.Scale(), t.scaler.Skipped()
		}
		t0 := time.Now()
		loss, err := t.TrainStep()
		if err != nil {
			return err
		}
		info := StepInfo{Step: t.step, Loss: loss, LR: lr, Duration: time.Since(t0), Val: math.NaN(), Scale: scale}
		info.Skipped = t.scaler != nil && t.scaler.Skipped() > skipped
		if t.step == t.Cfg.Iters || (t.Cfg.EvalEvery > 0 && t.step%t.Cfg.EvalEvery == 0) {
			v, err := t.Evaluate()
			if err != nil {
				return err
			}
			t.History = append(t.History, Point{Step: t.step, Train: t.meanLossSinceLastPoint(), Val: v})
			info.Val = v
		}
		if onStep != nil {
			onStep(info)
		}
	}
	return nil
}

func (t *Trainer) meanLossSinceLastPoint() float64 {
	from := 0
	if n := len(t.History); n > 0 {
		from = t.History[n-1].Step
	}
	sum := 0.0
	for _, l := range t.Losses[from:t.step] {
		sum += float64(l)
	}
	return sum / float64(t.step-from)
}
