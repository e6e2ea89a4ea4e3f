package lab

import (
	"fmt"
	"math"
	"strings"

	"gptlab/models"
	"gptlab/precision"
)

// Train holds the settings of a GPT training run: the gpt lab's, the
// precision lab's and `gptlab gpt train`'s.
type Train struct {
	Config      string           `set:"config" help:"model preset: tiny, small or baby"`
	Data        string           `set:"data" help:"UTF-8 text file; empty: the embedded Markov corpus"`
	Iters       int              `set:"iters" help:"training steps (the schedule's length)"`
	LR          float64          `set:"lr" help:"peak learning rate (warmup, then cosine decay to a tenth)"`
	Warmup      int              `set:"warmup" help:"linear warmup steps; 0: a tenth of iters, at most 100 (the report shows the number used)"`
	Batch       int              `set:"batch" help:"sequences per step; 0: the preset's (the report shows the number used)"`
	Dropout     float64          `set:"dropout" help:"dropout probability"`
	Beta2       float64          `set:"beta2" help:"AdamW's second-moment decay (the reference's 0.95)"`
	GradClip    float64          `set:"grad-clip" help:"clip the global gradient norm to this; 0: no clipping"`
	EvalEvery   int              `set:"eval-every" help:"validate every this many steps; 0: iters/10 (the report shows the number used)"`
	EvalBatches int              `set:"eval-batches" help:"validation batches per evaluation (the same ones each time)"`
	SampleChars int              `set:"sample-chars" help:"characters sampled from the model for the report"`
	Target      float64          `set:"target" help:"val loss to reach: report the training time until the first validation at or below it (0: none)"`
	Checkpoint  CheckpointPolicy `set:"checkpoint" help:"gradient checkpointing: none, every:K, sqrt, selective or budget:B (same losses, less memory)"`
	Precision   precision.Policy `set:"precision" help:"precision policy: f32, bf16, fp16 (dynamic loss scaling) or fp16-noscale"`
}

// Setup turns the settings into a training config and its dataset,
// resolving the settings whose 0 means a default (batch, eval-every) to the
// values used. Unusable settings or data are errors wrapping ErrUsage, one
// naming each setting at fault.
func (c *Train) Setup(seed int64) (models.TrainConfig, *models.Dataset, error) {
	mc, err := models.Preset(c.Config)
	if err != nil {
		return models.TrainConfig{}, nil, Usagef("--set config=%s: unknown preset (want %s)", c.Config, strings.Join(models.PresetNames(), ", "))
	}
	if c.Precision.Name == "" {
		c.Precision = precision.F32Policy
	}
	if c.Warmup == 0 { // the default adapts to the run's length; an explicit warmup over iters is refused
		c.Warmup = min(DefaultWarmup, max(c.Iters, 0)/10)
	}
	if err := c.validate(); err != nil {
		return models.TrainConfig{}, nil, err
	}
	if c.Batch == 0 {
		c.Batch = mc.Batch
	}
	mc.Batch = c.Batch
	mc.Dropout = c.Dropout
	var data *models.Dataset
	if c.Data == "" {
		data, err = models.DefaultCorpus(uint64(seed), mc.Block)
	} else {
		data, err = models.LoadText(c.Data, mc.Block)
	}
	if err != nil {
		return models.TrainConfig{}, nil, Usagef("--set data=%s: %v", c.Data, err)
	}
	mc.Vocab = data.Tok.Vocab()
	if c.EvalEvery == 0 {
		c.EvalEvery = max(1, c.Iters/10)
	}
	tc := models.TrainConfig{Model: mc, Iters: c.Iters, LR: c.LR, Warmup: c.Warmup,
		EvalEvery: c.EvalEvery, EvalBatches: c.EvalBatches, Beta2: c.Beta2, GradClip: c.GradClip, Seed: seed,
		Precision: c.Precision}
	if err := tc.Validate(); err != nil {
		return models.TrainConfig{}, nil, Usagef("%v", err)
	}
	if tc.Steps, err = c.schedule(mc, seed); err != nil {
		return models.TrainConfig{}, nil, err
	}
	return tc, data, nil
}

// schedule resolves --set checkpoint for the model mc (a budget is
// searched on the chain of fresh parameters and a random batch: sizes and
// times do not depend on the values).
func (c *Train) schedule(mc models.Config, seed int64) (*models.StepSchedule, error) {
	if c.Checkpoint.Name == "" {
		c.Checkpoint = NoCheckpoint
	}
	n := mc.Batch * mc.Block
	idx, tgt := make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i], tgt[i] = int32(i%mc.Vocab), int32((i+1)%mc.Vocab)
	}
	return ResolveCheckpoint(c.Checkpoint, mc, models.NewParams(mc, seed), mc.Batch, mc.Block, idx, tgt)
}

// DefaultWarmup is the warmup of a long run (nanoGPT's shakespeare-char
// setting); a run shorter than ten times it warms up over a tenth of its
// steps.
const DefaultWarmup = 100

// MaxBatch bounds --set batch: a batch beyond it needs more memory for the
// activations than a laptop has, at any preset.
const MaxBatch = 4096

// validate checks each setting on its own and against the others.
func (c *Train) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for _, v := range []struct {
		bad bool
		msg string
	}{
		{c.Iters < 1, fmt.Sprintf("--set iters=%d: want at least 1", c.Iters)},
		{!(c.LR > 0) || !finite(c.LR), fmt.Sprintf("--set lr=%v: want a positive number", c.LR)},
		{c.Warmup < 0, fmt.Sprintf("--set warmup=%d: want 0 or more", c.Warmup)},
		{c.Warmup > c.Iters, fmt.Sprintf("warmup=%d is longer than iters=%d: set warmup to at most iters", c.Warmup, c.Iters)},
		{c.Batch < 0 || c.Batch > MaxBatch, fmt.Sprintf("--set batch=%d: want 1 to %d, or 0 for the preset's", c.Batch, MaxBatch)},
		{!(c.Dropout >= 0 && c.Dropout < 1), fmt.Sprintf("--set dropout=%v: want at least 0 and below 1", c.Dropout)},
		{!(c.Beta2 > 0 && c.Beta2 < 1), fmt.Sprintf("--set beta2=%v: want above 0 and below 1 (the reference's is 0.95)", c.Beta2)},
		{!(c.GradClip >= 0) || !finite(c.GradClip), fmt.Sprintf("--set grad-clip=%v: want 0 (no clipping) or a positive number", c.GradClip)},
		{c.EvalEvery < 0, fmt.Sprintf("--set eval-every=%d: want 0 (iters/10) or more", c.EvalEvery)},
		{c.EvalEvery > c.Iters, fmt.Sprintf("eval-every=%d is longer than iters=%d: the run would validate only at its end; set eval-every to at most iters", c.EvalEvery, c.Iters)},
		{c.EvalBatches < 1, fmt.Sprintf("--set eval-batches=%d: want at least 1", c.EvalBatches)},
		{c.SampleChars < 0 || c.SampleChars > 10_000, fmt.Sprintf("--set sample-chars=%d: want 0 (no sample) to 10000", c.SampleChars)},
		{!(c.Target >= 0) || !finite(c.Target), fmt.Sprintf("--set target=%v: want a val loss above 0, or 0 for none", c.Target)},
	} {
		if v.bad {
			return Usagef("%s", v.msg)
		}
	}
	return nil
}
