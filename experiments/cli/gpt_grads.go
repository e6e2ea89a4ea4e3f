package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"gptlab/experiments/lab"
	"gptlab/internal/safetensors"
	"gptlab/models"
)

func init() {
	RegisterCommand(&Command{
		Name:  "gpt grads",
		Usage: "--model M --batch B --out O [--adamw-steps K] [--seed N] [--set key=value ...]",
		Short: "one forward and backward pass written in the layout of gpt_reference.py golden",
		Long: "--out receives logits (B, T, V), loss [1] and grad.<name> for every parameter; with " +
			"--adamw-steps K also after.<name> (the parameters after K AdamW steps on the batch) and " +
			"adamw.losses [K]. --set dropout=P turns dropout on (masks keyed by --seed and the step), " +
			"--set checkpoint=POLICY builds the step with gradient checkpointing (none, every:K, sqrt, selective, " +
			"budget:B) and --set rng=stateful draws the masks from a sequential generator restored around " +
			"recomputations; every policy writes the same loss and gradients, to the bit. Nothing is written " +
			"unless everything succeeded, and the file is written atomically.",
		Setup: gptGradsCommand,
	})
}

func gptGradsCommand(fs *flag.FlagSet) Runner {
	modelPath := fs.String("model", "", "weights `M`: params.safetensors or model.safetensors of gpt train --out, or the reference's model file")
	batchPath := fs.String("batch", "", "batch file `B`: idx and targets, I64 or I32, shape [batch, T]")
	outPath := fs.String("out", "", "output safetensors file `O`")
	steps := fs.Int("adamw-steps", 0, "AdamW steps `K` to run on the batch after the gradients (lr 1e-3)")
	seed := fs.Int64("seed", 1, "seed `N` of the dropout masks")
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value`: dropout=P, checkpoint=POLICY, rng=stateless|stateful")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("gpt grads", args); err != nil {
			return err
		}
		gc := gradsConfig{Checkpoint: lab.NoCheckpoint, RNG: "stateless"}
		if err := lab.ApplySets(&gc, sets); err != nil {
			return err
		}
		gc.Seed = *seed
		return gptGrads(ctx, *modelPath, *batchPath, *outPath, *steps, gc, stdout)
	}
}

// gradsConfig is what gpt grads' --set and --seed change.
type gradsConfig struct {
	Dropout    float64              `set:"dropout" help:"dropout probability"`
	Checkpoint lab.CheckpointPolicy `set:"checkpoint" help:"gradient checkpointing policy: none, every:K, sqrt, selective, budget:B"`
	RNG        string               `set:"rng" help:"dropout masks: stateless (counters) or stateful (a generator)"`
	Seed       int64
}

// maxAdamWSteps bounds --adamw-steps.
const maxAdamWSteps = 10_000

// gptGrads is `gptlab gpt grads`: one forward and backward pass of the
// model in modelPath on the batch in batchPath, written to outPath in the
// layout of gpt_reference.py golden. Bad input, an unwritable outPath
// included, is an error wrapping lab.ErrUsage, found before any work.
func gptGrads(ctx context.Context, modelPath, batchPath, outPath string, steps int, gc gradsConfig, stdout io.Writer) error {
	switch {
	case !(gc.Dropout >= 0 && gc.Dropout < 1):
		return lab.Usagef("gpt grads: --set dropout=%v: want in [0, 1)", gc.Dropout)
	case gc.RNG != "stateless" && gc.RNG != "stateful":
		return lab.Usagef("gpt grads: --set rng=%s: want stateless or stateful", gc.RNG)
	case modelPath == "":
		return lab.Usagef("gpt grads: --model is required")
	case batchPath == "":
		return lab.Usagef("gpt grads: --batch is required")
	case outPath == "":
		return lab.Usagef("gpt grads: --out is required")
	case steps < 0 || steps > maxAdamWSteps:
		return lab.Usagef("gpt grads: --adamw-steps %d: want 0 to %d", steps, maxAdamWSteps)
	}
	if err := checkOutFile("gpt grads --out", outPath); err != nil {
		return err
	}
	p, err := models.LoadParams(modelPath)
	if err != nil {
		return lab.Usagef("gpt grads: --model: %v", err)
	}
	cfg := p.Config()
	idx, tgt, B, T, err := readBatch(batchPath, cfg)
	if err != nil {
		if msg := err.Error(); strings.HasPrefix(msg, batchPath+": ") { // the reader named the file already
			return lab.Usagef("gpt grads: --batch %s", msg)
		}
		return lab.Usagef("gpt grads: --batch %s: %v", batchPath, err)
	}
	cfg.Batch, cfg.Dropout = B, gc.Dropout
	if err := gc.Checkpoint.Check(cfg.Layers); err != nil { // before any work
		return lab.Usagef("--set checkpoint=%s: %v", gc.Checkpoint.Name, err)
	}
	var out map[string]safetensors.Tensor
	var loss float32
	err = untilInterrupted(ctx, func() error {
		sched, err := lab.ResolveCheckpoint(gc.Checkpoint, cfg, p, B, T, idx, tgt)
		if err != nil {
			return err
		}
		var opts []models.ModelOption
		if gc.RNG == "stateful" && sched == nil {
			s := models.PlainStepSchedule(cfg)
			sched = &s
		}
		if sched != nil {
			opts = append(opts, models.WithStepSchedule(*sched))
		}
		if gc.RNG == "stateful" {
			opts = append(opts, models.WithRNG(models.RNGOptions{Kind: models.Stateful, Preserve: true}))
		}
		out, loss, err = gradsOf(p, cfg, idx, tgt, B, T, steps, gc.Seed, opts...)
		return err
	})
	if err != nil {
		return err
	}
	if err := safetensors.Write(outPath, out, cfg.Metadata()); err != nil {
		return lab.Usagef("gpt grads: --out %s: %v", outPath, err)
	}
	fmt.Fprintf(stdout, "wrote %s: loss=%.6f\n", outPath, loss)
	return nil
}

// gradsOf runs the pass (and the AdamW steps) and returns the tensors of
// the output file and the loss.
func gradsOf(p *models.Params, cfg models.Config, idx, tgt []int32, B, T, steps int, seed int64, opts ...models.ModelOption) (map[string]safetensors.Tensor, float32, error) {
	m, err := models.NewModel(cfg, p, B, T, true, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("gpt grads: %w", err)
	}
	defer m.Close()
	m.SetDropoutSeed(seed)
	loss, err := m.Step(idx, tgt)
	if err != nil {
		return nil, 0, fmt.Errorf("gpt grads: %w", err)
	}
	out := map[string]safetensors.Tensor{
		"idx":     intsTensor(idx, B, T),
		"targets": intsTensor(tgt, B, T),
		"logits":  safetensors.F32([]int{B, T, cfg.Vocab}, append([]float32(nil), m.Logits()...)),
		"loss":    safetensors.F32([]int{1}, []float32{loss}),
	}
	for _, n := range p.Names() {
		out["grad."+n] = safetensors.F32(p.Shape(n), append([]float32(nil), m.Grad(n)...))
	}
	if steps > 0 {
		opt := models.NewAdamW(p, models.DefaultAdamW())
		losses := make([]float32, steps)
		for k := range losses {
			if losses[k], err = m.Step(idx, tgt); err != nil {
				return nil, 0, fmt.Errorf("gpt grads: AdamW step %d: %w", k+1, err)
			}
			if _, err := opt.Step(m, 0); err != nil {
				return nil, 0, fmt.Errorf("gpt grads: AdamW step %d: %w", k+1, err)
			}
		}
		for n, t := range p.Tensors("after.") {
			out[n] = safetensors.F32(t.Shape, append([]float32(nil), t.F32...))
		}
		out["adamw.losses"] = safetensors.F32([]int{steps}, losses)
	}
	return out, loss, nil
}

func intsTensor(v []int32, B, T int) safetensors.Tensor {
	d := make([]int64, len(v))
	for i, x := range v {
		d[i] = int64(x)
	}
	return safetensors.Int("I64", []int{B, T}, d)
}

// readBatch reads idx and targets: integer tensors of one shape [B, T],
// T <= block, every value a token of the vocabulary.
func readBatch(path string, cfg models.Config) (idx, tgt []int32, B, T int, err error) {
	ts, _, err := safetensors.Read(path)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	get := func(name string) ([]int32, []int, error) {
		t, ok := ts[name]
		if !ok {
			return nil, nil, fmt.Errorf("no tensor %q", name)
		}
		if t.DType != "I64" && t.DType != "I32" {
			return nil, nil, fmt.Errorf("tensor %q has dtype %s, want I64 or I32", name, t.DType)
		}
		if len(t.Shape) != 2 || t.Shape[0] < 1 || t.Shape[1] < 1 {
			return nil, nil, fmt.Errorf("tensor %q has shape %v, want [batch, T]", name, t.Shape)
		}
		out := make([]int32, len(t.Ints))
		for i, v := range t.Ints {
			if v < 0 || v >= int64(cfg.Vocab) {
				return nil, nil, fmt.Errorf("tensor %q: value %d at %d outside the vocabulary [0, %d)", name, v, i, cfg.Vocab)
			}
			out[i] = int32(v)
		}
		return out, t.Shape, nil
	}
	idx, si, err := get("idx")
	if err != nil {
		return nil, nil, 0, 0, err
	}
	tgt, st, err := get("targets")
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if si[0] != st[0] || si[1] != st[1] {
		return nil, nil, 0, 0, fmt.Errorf("idx has shape %v but targets %v", si, st)
	}
	if si[1] > cfg.Block {
		return nil, nil, 0, 0, fmt.Errorf("the sequence length T = %d exceeds the model's block size %d", si[1], cfg.Block)
	}
	return idx, tgt, si[0], si[1], nil
}
