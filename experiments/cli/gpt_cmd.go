package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gptlab/experiments/gpt"
	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// This file holds the gpt command group: train, eval and sample (grads
// is in gpt_grads.go).

func init() {
	RegisterCommand(&Command{Name: "gpt", Short: "the small GPT on its own: train it, evaluate and sample a checkpoint, dump its gradients"})
	RegisterCommand(&Command{
		Name:  "gpt train",
		Usage: "[--set key=value ...] [--seed N] [--steps K] [--resume CKPT] [--format F] [--out DIR]",
		Short: "train the GPT with a checkpoint in --out, and print the gpt lab's report",
		Long: "The settings are the gpt lab's, with the defaults of the PyTorch reference's train mode " +
			"(gpt_reference.py train: tiny, lr 0.001, listed below), so a run compares with the reference's " +
			"step for step; gptlab run gpt has the lab's (small, lr 0.01: the embedded corpus learned in about " +
			"a minute), and gptlab help gpt shows both. " +
			"--out DIR receives model.safetensors (parameters, AdamW state and data position, saved at every " +
			"validation, at the end and when interrupted) and params.safetensors (the parameters alone). " +
			"--resume continues a checkpoint exactly where it stopped; --steps stops after K more steps.",
		Setup: gptTrainCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&gptTrainDefaults, nil).WriteText(w, reports.Width)
		},
	})
	RegisterCommand(&Command{
		Name:  "gpt eval",
		Usage: "--model CKPT [--set key=value ...] [--format F] [--out DIR]",
		Short: "the validation loss of a checkpoint, on its own data or on another file",
		Setup: gptEvalCommand,
	})
	RegisterCommand(&Command{
		Name:  "gpt sample",
		Usage: "--model CKPT [--prompt S] [--tokens N] [--temperature T] [--top-k K] [--seed N]",
		Short: "text from a checkpoint, reproducible from --seed",
		Setup: gptSampleCommand,
	})
}

func gptTrainCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	seed := seedFlag(fs, "seed `N` of the parameters, the batches and the embedded corpus")
	steps := fs.Int("steps", 0, "stop after `K` more steps of the schedule (0: run it to the end)")
	resume := fs.String("resume", "", "training checkpoint `CKPT` to continue (its settings and data are reused)")
	format, out := reportFlags(fs, "the checkpoint, report.md, report.json and the figures")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("gpt train", args); err != nil {
			return err
		}
		if !(*steps >= 0) {
			return lab.Usagef("gpt train: --steps %d: want 0 (to the end) or more", *steps)
		}
		if *resume != "" && len(sets) > 0 {
			return lab.Usagef("gpt train: --set cannot be combined with --resume (the checkpoint holds the settings)")
		}
		if *resume != "" && flagGiven(fs, "seed") {
			return lab.Usagef("gpt train: --seed cannot be combined with --resume (the checkpoint holds its seed)")
		}
		cfg := gptTrainDefaults
		if err := lab.ApplySets(&cfg, sets); err != nil {
			return err
		}
		tr, err := gptTrainer(&cfg, *resume, seed)
		if err != nil {
			return err
		}
		defer tr.Close()
		until, left := tr.Cfg.Iters, tr.Cfg.Iters-tr.StepsDone()
		switch {
		case *resume != "" && left == 0:
			return lab.Usagef("gpt train: --resume %s: the run is complete (%d of %d steps); nothing to continue", *resume, tr.StepsDone(), tr.Cfg.Iters)
		case *steps > left && *resume != "":
			return lab.Usagef("gpt train: --steps %d: the checkpoint has %d steps left of its %d-step schedule", *steps, left, tr.Cfg.Iters)
		case *steps > left:
			return lab.Usagef("gpt train: --steps %d is more than iters=%d, the schedule's length: set iters, or drop --steps", *steps, tr.Cfg.Iters)
		case *steps > 0:
			until = tr.StepsDone() + *steps
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		ckpt := ""
		if *out != "" {
			if err := os.MkdirAll(*out, 0o755); err != nil {
				return lab.Usagef("--out %s: %v", *out, pathCause(err))
			}
			ckpt = filepath.Join(*out, "model.safetensors")
		}
		run, err := gpt.TrainWithProgress(ctx, tr, until, logFor(*format, stderr), ckpt)
		if err != nil {
			return err
		}
		if ckpt != "" {
			// the parameters alone, loadable by gpt grads and by the reference
			if err := tr.Params.SaveParams(filepath.Join(*out, "params.safetensors")); err != nil {
				return lab.Usagef("--out %s: %v", *out, err)
			}
		}
		r, err := gpt.Report(tr, run, cfg, *seed)
		if err != nil {
			return err
		}
		r.Lab = "gpt-train"
		r.Config = trainConfigValues(tr)
		r.Config.Set("seed", *seed)
		if *resume != "" {
			r.Config.Set("resumed_from", *resume)
		}
		if ckpt != "" {
			r.Note("Checkpoint: %s (parameters, AdamW state, data position; gptlab gpt train --resume continues it, gpt eval and gpt sample read it); the parameters alone, as the reference writes them: %s.", ckpt, filepath.Join(*out, "params.safetensors"))
		}
		return emit(r, *format, *out, stdout)
	}
}

// gptTrainer is a fresh trainer from cfg and *seed, or the one a
// checkpoint holds (setting *seed to its seed).
func gptTrainer(cfg *lab.Train, resume string, seed *int64) (*models.Trainer, error) {
	if resume == "" {
		tc, data, err := cfg.Setup(*seed)
		if err != nil {
			return nil, err
		}
		return models.NewTrainer(tc, data)
	}
	ck, err := models.LoadCheckpoint(resume)
	if err != nil {
		return nil, lab.Usagef("gpt train: --resume: %v", err)
	}
	data, err := ck.LoadData()
	if err != nil {
		return nil, lab.Usagef("gpt train: --resume %s: %v", resume, err)
	}
	tr, err := ck.Resume(data)
	if err != nil {
		return nil, lab.Usagef("gpt train: --resume %s: %v", resume, err)
	}
	*seed = ck.Cfg.Seed
	return tr, nil
}

// gptTrainDefaults are the reference's train mode: lr 1e-3 with 100 warmup
// steps over 2000 iterations, the preset's batch.
var gptTrainDefaults = lab.Train{
	Config: "tiny", Iters: 2000, LR: 1e-3, Warmup: 0, Batch: 0, Beta2: 0.95,
	EvalBatches: 20, SampleChars: 120, Checkpoint: lab.NoCheckpoint, Precision: precision.F32Policy,
}

// trainConfigValues is the report's config section for a trainer.
func trainConfigValues(tr *models.Trainer) reports.Values {
	var v reports.Values
	c := tr.Cfg
	v.Set("data", tr.Data.Name)
	v.Set("vocab", c.Model.Vocab)
	v.Set("block", c.Model.Block)
	v.Set("layers", c.Model.Layers)
	v.Set("heads", c.Model.Heads)
	v.Set("embd", c.Model.Embd)
	v.Set("batch", c.Model.Batch)
	v.Set("dropout", c.Model.Dropout)
	v.Set("iters", c.Iters)
	v.Set("lr", c.LR)
	v.Set("warmup", c.Warmup)
	v.Set("beta2", c.Beta2)
	v.Set("grad-clip", c.GradClip)
	v.Set("eval-every", c.EvalEvery)
	v.Set("eval-batches", c.EvalBatches)
	v.Set("precision", c.Precision.Name)
	return v
}

// gptEvalConfig are the settings of `gptlab gpt eval`.
type gptEvalConfig struct {
	Data        string `set:"data" help:"UTF-8 text file; empty: the data the checkpoint was trained on"`
	EvalBatches int    `set:"eval-batches" help:"validation batches; 0: the checkpoint's"`
}

// gptEvalCommand is `gptlab gpt eval`: the validation loss of a
// checkpoint on its own data or on another file with the same vocabulary.
func gptEvalCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value`: data=PATH (a file with the checkpoint's characters) or eval-batches=N")
	model := fs.String("model", "", "training checkpoint `CKPT`: model.safetensors of gpt train --out (params.safetensors lacks the vocabulary)")
	format, out := reportFlags(fs, "report.md and report.json")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("gpt eval", args); err != nil {
			return err
		}
		if *model == "" {
			return lab.Usagef("gpt eval: --model is required")
		}
		var ec gptEvalConfig
		if err := lab.ApplySets(&ec, sets); err != nil {
			return err
		}
		if ec.EvalBatches < 0 {
			return lab.Usagef("gpt eval: --set eval-batches=%d: want 1 or more, or 0 for the checkpoint's", ec.EvalBatches)
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		if ic, err := models.LoadInt8Checkpoint(*model); !errors.Is(err, models.ErrNotInt8) {
			if err != nil {
				return lab.Usagef("gpt eval: --model: %v", err)
			}
			return gptEvalInt8(ctx, ic, ec, *model, *format, *out, stdout)
		}
		ck, err := models.LoadCheckpoint(*model)
		if err != nil {
			return lab.Usagef("gpt eval: --model: %v", err)
		}
		data, err := gptEvalData(ec, ck.LoadData, ck.Vocab, ck.Cfg.Model.Block)
		if err != nil {
			return err
		}
		tc := ck.Cfg
		if ec.EvalBatches > 0 {
			tc.EvalBatches = ec.EvalBatches
		}
		tr, err := models.NewTrainerFrom(tc, data, ck.Params)
		if err != nil {
			return lab.Usagef("gpt eval: %v", err)
		}
		defer tr.Close()
		t0 := time.Now()
		var vals []float64
		if err := untilInterrupted(ctx, func() (err error) { vals, err = tr.ValLosses(); return err }); err != nil {
			return err
		}
		r := reports.New("gpt-eval", fmt.Sprintf("Validation loss of %s on %s", *model, data.Name))
		evalReport(r, vals, time.Since(t0), tc.Model, ck.Step, data, tr.OracleLosses())
		r.Config = trainConfigValues(tr)
		r.Config.Set("model", *model)
		return emit(r, *format, *out, stdout)
	}
}

// gptEvalData is the data gpt eval reads: the checkpoint's own (own), or
// the file --set data names, which must have the checkpoint's vocabulary.
func gptEvalData(ec gptEvalConfig, own func() (*models.Dataset, error), vocab string, block int) (*models.Dataset, error) {
	var data *models.Dataset
	var err error
	if ec.Data == "" {
		data, err = own()
	} else {
		data, err = models.LoadText(ec.Data, block)
		if err == nil && data.Tok.Chars() != vocab {
			err = fmt.Errorf("%w: vocabulary of %d characters differs from the checkpoint's %d (a char-level model reads only its own characters)", models.ErrBadData, data.Tok.Vocab(), len([]rune(vocab)))
		}
	}
	if err != nil {
		return nil, lab.Usagef("gpt eval: data: %v", err)
	}
	return data, nil
}

// evalReport fills gpt eval's metrics and checks from the validation
// losses vals of a model of mc (taking took), at step, on data, against
// the ideal model's oracle losses on the same batches (nil: data without
// a known source).
func evalReport(r *reports.Report, vals []float64, took time.Duration, mc models.Config, step int, data *models.Dataset, oracle []float64) {
	val := lab.Mean(vals)
	r.Metric("val_loss_nats", val)
	r.Metric("eval_tokens", len(vals)*mc.Batch*mc.Block)
	r.Metric("eval_seconds", took.Seconds())
	r.Metric("checkpoint_step", step)
	if oracle != nil && data.Source != nil {
		r.Metric("oracle_val_loss_nats", lab.Mean(oracle))
		r.Metric("entropy_rate_nats", data.Source.EntropyRate())
		r.Metric("gap_to_oracle_nats", val-lab.Mean(oracle))
		tol := gpt.OracleTolerance(vals, oracle)
		r.Check("no better than the ideal model", val >= lab.Mean(oracle)-tol,
			"val loss %.4f ≥ ideal model's %.4f on the same batches − %.4f", val, lab.Mean(oracle), tol)
	}
	r.Check("val loss is finite", !math.IsNaN(val) && !math.IsInf(val, 0), "%v", val)
}

// maxSampleTokens bounds gpt sample --tokens.
const maxSampleTokens = 1_000_000

func gptSampleCommand(fs *flag.FlagSet) Runner {
	model := fs.String("model", "", "training checkpoint `CKPT`: model.safetensors of gpt train --out (params.safetensors lacks the vocabulary)")
	prompt := fs.String("prompt", "", "text `S` to continue, in the model's characters (empty: start from token 0)")
	tokens := fs.Int("tokens", 500, "characters `N` to generate")
	temp := fs.Float64("temperature", 1, "divide the logits by `T`; 0 picks the most likely character")
	topK := fs.Int("top-k", 0, "sample among the `K` most likely characters; 0: all")
	seed := fs.Uint64("seed", 1, "seed `N` of the draws")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("gpt sample", args); err != nil {
			return err
		}
		switch {
		case *model == "":
			return lab.Usagef("gpt sample: --model is required")
		case *tokens < 0 || *tokens > maxSampleTokens:
			return lab.Usagef("gpt sample: --tokens %d: want 0 to %d", *tokens, maxSampleTokens)
		case !(*temp >= 0) || math.IsInf(*temp, 0):
			return lab.Usagef("gpt sample: --temperature %v: want 0 (the most likely character) or a positive number", *temp)
		}
		params, tok, opts, err := sampleModel(*model, stderr)
		if err != nil {
			return err
		}
		if *topK < 0 || *topK > tok.Vocab() {
			return lab.Usagef("gpt sample: --top-k %d: want 0 (all) to %d, the vocabulary's size", *topK, tok.Vocab())
		}
		if _, err := tok.Encode(*prompt); err != nil {
			return lab.Usagef("gpt sample: --prompt: %v", err)
		}
		s, err := models.NewSampler(params, tok, opts...)
		if err != nil {
			return lab.Usagef("gpt sample: --model %s: %v", *model, err)
		}
		var text string
		err = untilInterrupted(ctx, func() (err error) {
			text, err = s.Generate(*prompt, models.SampleConfig{Tokens: *tokens, Temperature: *temp, TopK: *topK, Seed: *seed})
			return err
		})
		if err != nil {
			if !errors.Is(err, lab.ErrInterrupted) && (errors.Is(err, models.ErrBadData) || errors.Is(err, models.ErrConfig)) {
				return lab.Usagef("gpt sample: sample settings: %s", strings.TrimPrefix(err.Error(), models.ErrConfig.Error()+": "))
			}
			return err
		}
		_, err = fmt.Fprintln(stdout, *prompt+text)
		return err
	}
}

// untilInterrupted runs work, which cannot stop early and writes nothing,
// and returns when it ends or when ctx is cancelled (leaving it behind).
func untilInterrupted(ctx context.Context, work func() error) error {
	done := make(chan error, 1)
	go func() { done <- work() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return lab.Interruptedf("interrupted; nothing saved")
	}
}
