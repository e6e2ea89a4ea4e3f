package experiments

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gptlab/models"
	"gptlab/reports"
)

func init() {
	commands["gpt"] = runGPT
}

const gptUsage = `usage:
  gptlab gpt train [--set key=value ...] [--seed N] [--steps K] [--resume CKPT] [--format F] [--out DIR]
  gptlab gpt eval --model CKPT [--set data=PATH] [--set eval-batches=N] [--format F] [--out DIR]
  gptlab gpt sample --model CKPT [--prompt S] [--tokens N] [--temperature T] [--top-k K] [--seed N]
  gptlab gpt grads --model M --batch B --out O [--adamw-steps K]
The train settings are the gpt lab's (gptlab help gpt lists them); gpt train's
defaults follow gpt_reference.py train: lr 1e-3, the preset's batch, 2000 iters.`

// runGPT dispatches `gptlab gpt SUBCOMMAND`.
func runGPT(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError("gpt: name a subcommand: train, eval, sample or grads (gptlab gpt help shows their flags)")
	}
	switch args[0] {
	case "train":
		return gptTrain(args[1:], stdout, stderr)
	case "eval":
		return gptEval(args[1:], stdout, stderr)
	case "sample":
		return gptSample(args[1:], stdout, stderr)
	case "grads":
		return gptGrads(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		_, err := fmt.Fprintln(stdout, gptUsage)
		return err
	}
	return usageError("gpt: unknown subcommand %q (want train, eval, sample or grads)", args[0])
}

// reportFlags are --format and --out, shared by train and eval.
func reportFlags(fs *flag.FlagSet) (format, out *string) {
	return fs.String("format", "table", "table, markdown, json or csv"),
		fs.String("out", "", "directory for the checkpoint (train), report.md, report.json and figures")
}

func checkFormat(format string) error {
	if !slices.Contains(reports.Formats, format) {
		return usageError("--format %q: want one of %s", format, strings.Join(reports.Formats, ", "))
	}
	return nil
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError("%s: %v", fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return usageError("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
	}
	return nil
}

// logFor is where progress goes: stderr, or nowhere under json and csv.
func logFor(format string, stderr io.Writer) io.Writer {
	if format == "json" || format == "csv" {
		return io.Discard
	}
	return stderr
}

// gptTrain is `gptlab gpt train`: the gpt lab's training with a checkpoint
// in --out (DIR/model.safetensors, saved atomically at every validation,
// at the end and on interrupt), --steps to stop early and --resume to
// continue a saved run exactly where it stopped.
func gptTrain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gpt train", flag.ContinueOnError)
	var sets setFlag
	fs.Var(&sets, "set", "key=value override of a setting (repeatable; gptlab help gpt lists them)")
	seed := fs.Int64("seed", 1, "seed of the parameters, the batches and the embedded corpus")
	steps := fs.Int("steps", 0, "stop after this many steps of the schedule (0: run it to the end)")
	resume := fs.String("resume", "", "training checkpoint to continue (its settings and data are reused)")
	format, out := reportFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if *steps < 0 {
		return usageError("gpt train: --steps = %d, want >= 0", *steps)
	}
	cfg := gptTrainDefaults
	if err := applySets(&cfg, sets); err != nil {
		return err
	}
	var tr *models.Trainer
	if *resume != "" {
		if len(sets) > 0 {
			return usageError("gpt train: --set cannot be combined with --resume (the checkpoint holds the settings)")
		}
		ck, err := models.LoadCheckpoint(*resume)
		if err != nil {
			return usageError("gpt train: --resume: %v", err)
		}
		data, err := ck.LoadData()
		if err != nil {
			return usageError("gpt train: --resume %s: %v", *resume, err)
		}
		if tr, err = ck.Resume(data); err != nil {
			return usageError("gpt train: --resume %s: %v", *resume, err)
		}
		*seed = ck.Cfg.Seed
	} else {
		tc, data, err := cfg.setup(*seed)
		if err != nil {
			return err
		}
		if tr, err = models.NewTrainer(tc, data); err != nil {
			return err
		}
	}
	defer tr.Close()
	until := tr.Cfg.Iters
	if *steps > 0 {
		until = min(until, tr.StepsDone()+*steps)
	}
	ckpt := ""
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return usageError("--out %s: %v", *out, err)
		}
		ckpt = filepath.Join(*out, "model.safetensors")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	run, err := trainWithProgress(ctx, tr, until, logFor(*format, stderr), ckpt)
	if err != nil {
		return err
	}
	if ckpt != "" {
		// the parameters alone, loadable by gpt grads and by the reference
		if err := tr.Params.SaveParams(filepath.Join(*out, "params.safetensors")); err != nil {
			return err
		}
	}
	r, err := gptReport(tr, run, cfg, *seed)
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

// gptTrainDefaults are the reference's train mode: lr 1e-3 with 100 warmup
// steps over 2000 iterations, the preset's batch.
var gptTrainDefaults = gptConfig{
	Config: "tiny", Iters: 2000, LR: 1e-3, Warmup: 100, Batch: 0, Beta2: 0.95,
	EvalBatches: 20, SampleChars: 120,
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
	v.Set("eval-every", c.EvalEvery)
	v.Set("eval-batches", c.EvalBatches)
	return v
}

// gptEvalConfig are the settings of `gptlab gpt eval`.
type gptEvalConfig struct {
	Data        string `set:"data" help:"UTF-8 text file; empty: the data the checkpoint was trained on"`
	EvalBatches int    `set:"eval-batches" help:"validation batches; 0: the checkpoint's"`
}

// gptEval is `gptlab gpt eval`: the validation loss of a checkpoint on its
// own data or on another file with the same vocabulary.
func gptEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gpt eval", flag.ContinueOnError)
	var sets setFlag
	fs.Var(&sets, "set", "data=PATH or eval-batches=N")
	model := fs.String("model", "", "training checkpoint (written by gpt train --out)")
	format, out := reportFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if *model == "" {
		return usageError("gpt eval: --model is required")
	}
	var ec gptEvalConfig
	if err := applySets(&ec, sets); err != nil {
		return err
	}
	if ec.EvalBatches < 0 {
		return usageError("gpt eval: --set eval-batches=%d: want >= 0", ec.EvalBatches)
	}
	ck, err := models.LoadCheckpoint(*model)
	if err != nil {
		return usageError("gpt eval: --model: %v", err)
	}
	var data *models.Dataset
	if ec.Data == "" {
		data, err = ck.LoadData()
	} else {
		data, err = models.LoadText(ec.Data, ck.Cfg.Model.Block)
		if err == nil && data.Tok.Chars() != ck.Vocab {
			err = fmt.Errorf("%w: vocabulary of %d characters differs from the checkpoint's %d (a char-level model reads only its own characters)", models.ErrBadData, data.Tok.Vocab(), len([]rune(ck.Vocab)))
		}
	}
	if err != nil {
		return usageError("gpt eval: data: %v", err)
	}
	tc := ck.Cfg
	if ec.EvalBatches > 0 {
		tc.EvalBatches = ec.EvalBatches
	}
	tr, err := models.NewTrainerFrom(tc, data, ck.Params)
	if err != nil {
		return usageError("gpt eval: %v", err)
	}
	defer tr.Close()
	t0 := time.Now()
	vals, err := tr.ValLosses()
	if err != nil {
		return err
	}
	secs := time.Since(t0).Seconds()
	val := gptMean(vals)
	r := reports.New("gpt-eval", fmt.Sprintf("Validation loss of %s on %s", *model, data.Name))
	r.Metric("val_loss_nats", val)
	r.Metric("eval_tokens", len(vals)*tc.Model.Batch*tc.Model.Block)
	r.Metric("eval_seconds", secs)
	r.Metric("checkpoint_step", ck.Step)
	if src := data.Source; src != nil {
		oracle := tr.OracleLosses()
		r.Metric("oracle_val_loss_nats", gptMean(oracle))
		r.Metric("entropy_rate_nats", src.EntropyRate())
		r.Metric("gap_to_oracle_nats", val-gptMean(oracle))
		tol := oracleTolerance(vals, oracle)
		r.Check("no better than the ideal model", val >= gptMean(oracle)-tol,
			"val loss %.4f ≥ ideal model's %.4f on the same batches − %.4f", val, gptMean(oracle), tol)
	}
	r.Check("val loss is finite", !math.IsNaN(val) && !math.IsInf(val, 0), "%v", val)
	r.Config = trainConfigValues(tr)
	r.Config.Set("model", *model)
	return emit(r, *format, *out, stdout)
}

// gptSample is `gptlab gpt sample`: text from a checkpoint, reproducible
// from --seed. It prints the prompt and its continuation.
func gptSample(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gpt sample", flag.ContinueOnError)
	model := fs.String("model", "", "checkpoint (written by gpt train --out)")
	prompt := fs.String("prompt", "", "text to continue (characters of the model's vocabulary); empty: token 0")
	tokens := fs.Int("tokens", 500, "characters to generate")
	temp := fs.Float64("temperature", 1, "divide the logits by this; 0 picks the most likely character")
	topK := fs.Int("top-k", 0, "sample among the K most likely characters; 0: all")
	seed := fs.Uint64("seed", 1, "seed of the draws")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usageError("gpt sample: --model is required")
	}
	ck, err := models.LoadCheckpoint(*model)
	if err != nil {
		return usageError("gpt sample: --model: %v", err)
	}
	s, err := models.NewSampler(ck.Params, ck.Tokenizer())
	if err != nil {
		return err
	}
	text, err := s.Generate(*prompt, models.SampleConfig{Tokens: *tokens, Temperature: *temp, TopK: *topK, Seed: *seed})
	if err != nil {
		if errors.Is(err, models.ErrBadData) || errors.Is(err, models.ErrConfig) {
			return usageError("gpt sample: %v", err)
		}
		return err
	}
	_, err = fmt.Fprintln(stdout, *prompt+text)
	return err
}

// progressBar shows training progress on the log writer. On a terminal it
// redraws one line (step, bar, loss, tokens/s, ETA) at most ten times a
// second; on anything else (a file, a pipe, io.Discard) it prints only a
// line per validation, so logs stay readable.
type progressBar struct {
	w      io.Writer
	tty    bool
	total  int
	drawn  time.Time
	active bool // a partial line is on screen
}

func newProgressBar(w io.Writer, total int) *progressBar {
	return &progressBar{w: w, tty: isTerminal(w), total: total}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// step records a finished training step.
func (p *progressBar) step(step int, loss float64, tokPerS float64, eta time.Duration) {
	if !p.tty || (time.Since(p.drawn) < 100*time.Millisecond && step < p.total) {
		return
	}
	p.drawn = time.Now()
	const width = 24
	filled := width * step / max(1, p.total)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	fmt.Fprintf(p.w, "\r%*d/%d [%s] loss %.4f  %s tok/s  ETA %s ", len(fmt.Sprint(p.total)), step, p.total, bar, loss, humanRate(tokPerS), eta.Round(time.Second))
	p.active = true
}

// eval records a validation result.
func (p *progressBar) eval(step int, train, val float64) {
	p.clear()
	fmt.Fprintf(p.w, "step %d/%d: train loss %.4f, val loss %.4f\n", step, p.total, train, val)
}

// clear ends a partial line so that other output starts on a fresh one.
func (p *progressBar) clear() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
		p.active = false
	}
}

func humanRate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}
