package precision

import (
	"context"
	"fmt"
	"time"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// The precision lab trains the GPT under the four precision policies of
// package precision on the same seed and the same batches, interleaved
// step by step (so the step times see the same machine), and compares
// them with f32: the validation loss each reaches, the steps dynamic loss
// scaling skipped and the scale's trajectory, the share of gradient
// values the casts to fp16 flush to zero with and without scaling
// (counted in the graph, at the casts), the bytes of the activations the
// step keeps for the backward and of the whole step as the arena plans
// them, the weights' bytes (float32 master and 16-bit copies), and the
// step time. Mixed precision here is the casts in the graph
// (models.WithPrecision); bf16's linear layers run on internal/bf16gemm
// where the CPU has VDPBF16PS or AMX, each shape on the path its
// calibration timed fastest, and the lab reports the calibration, the
// step's speed-up against its 1.3x target where some product took a
// hardware path (the reason and the rates where none did), and the GEMM
// rates of every path beside float32's on the GPT's shapes.

// precisionConfig holds the settings of the precision lab.
type precisionConfig struct {
	Config         string  `set:"config" help:"model preset: tiny, small or baby"`
	Data           string  `set:"data" help:"UTF-8 text file; empty: the embedded Markov corpus"`
	Iters          int     `set:"iters" help:"training steps of every policy (at least 40)"`
	LR             float64 `set:"lr" help:"peak learning rate (warmup, then cosine decay to a tenth)"`
	Warmup         int     `set:"warmup" help:"linear warmup steps"`
	Batch          int     `set:"batch" help:"sequences per step; 0: the preset's (the report shows the number used)"`
	GradClip       float64 `set:"grad-clip" help:"clip the global gradient norm (after unscaling) to this; 0: no clipping"`
	EvalEvery      int     `set:"eval-every" help:"validate every this many steps; 0: iters/10 (the report shows the number used)"`
	EvalBatches    int     `set:"eval-batches" help:"validation batches per evaluation (the same ones each time)"`
	UnderflowEvery int     `set:"underflow-every" help:"count the gradient values the 16-bit casts flush to zero every this many steps"`
	GEMMRuns       int     `set:"gemm-runs" help:"timed runs of each GEMM shape on each path (the best is reported)"`
}

// precisionDefaults: baby on the embedded corpus, a few minutes for all
// four policies on 2 cores.
var precisionDefaults = precisionConfig{
	Config: "baby", Iters: 400, LR: 3e-3, Warmup: 40, GradClip: 1, EvalBatches: 10, UnderflowEvery: 10, GEMMRuns: 5,
}

// Lab is the precision lab.
var Lab = lab.New("precision", "mixed precision: fp16/bf16 storage, f32 accumulation, dynamic loss scaling",
	precisionDefaults, precisionQuick, runPrecision)

// precisionQuick trains tiny (16 sequences a step) for at most 300 steps.
func precisionQuick(c *precisionConfig) {
	c.Config = "tiny"
	c.Batch = 16
	c.Iters = min(c.Iters, 300)
	c.LR = 1e-2
	c.Warmup = min(c.Warmup, c.Iters/10)
	c.EvalBatches = min(c.EvalBatches, 10)
	c.GEMMRuns = min(c.GEMMRuns, 3)
}

// precisionPolicies are the policies the lab compares, f32 first.
var precisionPolicies = []string{"f32", "bf16", "fp16", "fp16-noscale"}

// policyRun is one policy's training and what was measured of it.
type policyRun struct {
	policy    precision.Policy
	tr        *models.Trainer
	model     *models.Model // the training step's
	mem       models.StepMemory
	under     models.Underflow // zero for f32 (no casts)
	scales    []float32        // the loss scale of every step
	skipped   []int            // the 1-based steps whose update was skipped
	stepTimes []time.Duration
	val       float64 // the last validation loss
	scale     float32 // the loss scale after the last step (1 without scaling)
	guarded   error   // a guarded run of the step's arena (fingerprints every read)
}

func (r *policyRun) name() string { return r.policy.Name }

// validate checks the lab's own settings (the training settings are
// checked by lab.Train.setup).
func (c *precisionConfig) validate() error {
	switch {
	case c.Iters < 40:
		return lab.Usagef("--set iters=%d: want at least 40 (the loss scaling check looks at the steps after the 20th)", c.Iters)
	case c.UnderflowEvery < 1:
		return lab.Usagef("--set underflow-every=%d: want at least 1", c.UnderflowEvery)
	case c.GEMMRuns < 1 || c.GEMMRuns > 1000:
		return lab.Usagef("--set gemm-runs=%d: want 1 to 1000", c.GEMMRuns)
	}
	return nil
}

func runPrecision(ctx context.Context, cfg *precisionConfig, opt lab.Options) (*reports.Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	gc := lab.Train{Config: cfg.Config, Data: cfg.Data, Iters: cfg.Iters, LR: cfg.LR, Warmup: cfg.Warmup, Batch: cfg.Batch,
		Beta2: models.DefaultBeta2, GradClip: cfg.GradClip, EvalEvery: cfg.EvalEvery, EvalBatches: cfg.EvalBatches}
	tc, data, err := gc.Setup(opt.Seed)
	if err != nil {
		return nil, err
	}
	cfg.Batch, cfg.EvalEvery = gc.Batch, gc.EvalEvery // the values used
	runs, err := trainPolicies(ctx, tc, data, cfg.UnderflowEvery, opt)
	defer func() {
		for _, r := range runs {
			r.tr.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	var how gemmRates
	stepGEMMs(&how, runs[1].policy)
	gemm := measureGEMMs(tc.Model, cfg.GEMMRuns)
	gemm.linear, gemm.mode, gemm.choices, gemm.causal = how.linear, how.mode, how.choices, how.causal
	return precisionReport(cfg, tc, runs, gemm)
}

// stepMemory is the memory of policy c's training step as the arena
// plans it for one stream: the halved step the lab times plans each
// stream's buffers apart, a larger arena that says how two streams share
// it, not what the policy keeps.
func stepMemory(c models.TrainConfig, tr *models.Trainer) (models.StepMemory, error) {
	m, err := models.NewModel(c.Model, tr.Params, c.Model.Batch, c.Model.Block, true, models.WithPrecision(c.Precision))
	if err != nil {
		return models.StepMemory{}, err
	}
	defer m.Close()
	return m.Memory()
}

// trainPolicies trains one trainer per policy from the same seed on the
// same batches, one step of each in turn.
func trainPolicies(ctx context.Context, tc models.TrainConfig, data *models.Dataset, every int, opt lab.Options) ([]*policyRun, error) {
	var runs []*policyRun
	if tc.Model.Batch%2 == 0 {
		tc.Streams = models.HalfBatches // each step as bench train runs it
	}
	for _, name := range precisionPolicies {
		c := tc
		var err error
		if c.Precision, err = precision.ParsePolicy(name); err != nil {
			return runs, err
		}
		tr, err := models.NewTrainer(c, data)
		if err != nil {
			return runs, err
		}
		r := &policyRun{tr: tr, policy: c.Precision}
		runs = append(runs, r)
		if r.model, err = tr.Model(); err != nil {
			return runs, err
		}
		if r.mem, err = stepMemory(c, tr); err != nil {
			return runs, err
		}
		if r.policy.Mixed() {
			if err := r.model.WatchUnderflow(&r.under); err != nil {
				return runs, err
			}
		}
	}
	bar := lab.NewProgressBar(opt.Log, tc.Iters)
	defer bar.Clear()
	t0 := time.Now()
	for step := 1; step <= tc.Iters; step++ {
		for _, r := range runs {
			r.under.Active = step%every == 0
			err := r.tr.Run(ctx, step, func(s models.StepInfo) {
				r.stepTimes = append(r.stepTimes, s.Duration)
				r.scales = append(r.scales, s.Scale)
				if s.Skipped {
					r.skipped = append(r.skipped, s.Step)
				}
			})
			if err != nil {
				return runs, fmt.Errorf("precision %s: %w", r.name(), err)
			}
		}
		f32 := runs[0].tr
		if p := f32.History[len(f32.History)-1]; p.Step == step {
			bar.Eval(step, p.Train, p.Val)
		}
		tokens := float64(len(runs) * step * tc.Model.Batch * tc.Model.Block) // every policy's
		bar.Step(step, float64(f32.Losses[step-1]), tokens/time.Since(t0).Seconds(), time.Since(t0)/time.Duration(step)*time.Duration(tc.Iters-step))
	}
	for _, r := range runs {
		r.under.Active = false
		r.guarded = r.model.Arena().RunGuarded() // the last batch once more, every read checked
		r.val, r.scale = r.tr.History[len(r.tr.History)-1].Val, 1
		if s := r.tr.LossScaler(); s != nil {
			r.scale = s.Scale()
		}
	}
	return runs, nil
}

// skippedAfter counts the skipped steps after the first n.
func (r *policyRun) skippedAfter(n int) int {
	k := 0
	for _, s := range r.skipped {
		if s > n {
			k++
		}
	}
	return k
}

// medianStep is the median training step time.
func (r *policyRun) medianStep() time.Duration { return lab.MedianDuration(r.stepTimes) }
