package experiments

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// The gpt lab trains the small GPT and sets its validation loss beside the
// best any model can reach. On the embedded corpus (a random order-2
// Markov chain, models.DefaultCorpusSpec) that best is known exactly: the
// entropy rate, and for a model that sees windows of T characters the
// block bound (models.MarkovSource.BlockBound). The report's checks:
// the loss fell; the model beat the unigram entropy (it learned more than
// character frequencies); and it did not beat the ideal model on the very
// same validation tokens by more than sampling noise, which would mean a
// bug such as targets leaking into the inputs.

// gptConfig holds the settings of the gpt lab and of `gptlab gpt train`.
type gptConfig struct {
	Config      string  `set:"config" help:"model preset: tiny, small or baby"`
	Data        string  `set:"data" help:"UTF-8 text file; empty: the embedded Markov corpus"`
	Iters       int     `set:"iters" help:"training steps (the schedule's length)"`
	LR          float64 `set:"lr" help:"peak learning rate (warmup, then cosine decay to a tenth)"`
	Warmup      int     `set:"warmup" help:"linear warmup steps"`
	Batch       int     `set:"batch" help:"sequences per step; 0: the preset's (the report shows the number used)"`
	Dropout     float64 `set:"dropout" help:"dropout probability"`
	Beta2       float64 `set:"beta2" help:"AdamW's second-moment decay (the reference's 0.95)"`
	GradClip    float64 `set:"grad-clip" help:"clip the global gradient norm to this; 0: no clipping"`
	EvalEvery   int     `set:"eval-every" help:"validate every this many steps; 0: iters/10 (the report shows the number used)"`
	EvalBatches int     `set:"eval-batches" help:"validation batches per evaluation (the same ones each time)"`
	SampleChars int     `set:"sample-chars" help:"characters sampled from the model for the report"`
	Target      float64 `set:"target" help:"val loss to reach: report the training time until the first validation at or below it (0: none)"`
	Checkpoint  string  `set:"checkpoint" help:"gradient checkpointing: none, every:K, sqrt, selective or budget:B (same losses, less memory)"`
	Precision   string  `set:"precision" help:"precision policy: f32, bf16, fp16 (dynamic loss scaling) or fp16-noscale"`
}

// gptDefaults: small learns the embedded corpus to within about a tenth of
// a nat of the ideal model in about a minute on 2 cores; --quick trains
// tiny for a few seconds.
var gptDefaults = gptConfig{
	Config: "small", Iters: 2000, LR: 1e-2, Warmup: 100, Batch: 0, Beta2: 0.95,
	EvalEvery: 0, EvalBatches: 20, SampleChars: 120, Checkpoint: "none", Precision: "f32",
}

func init() {
	Register("gpt", "the small GPT: train, loss curve against the entropy rate, sample", gptDefaults, gptQuick, runGPTLab)
}

// gptQuick shrinks a run to a few seconds on 2 cores: tiny with 16
// sequences a step, at most 1500 steps, at most 10 validation batches.
func gptQuick(c *gptConfig) {
	c.Config = "tiny"
	c.Batch = 16
	c.Iters = min(c.Iters, 1500)
	c.EvalBatches = min(c.EvalBatches, 10)
	c.Warmup = min(c.Warmup, c.Iters/10)
}

// setup turns the settings into a training config and its dataset,
// resolving the settings whose 0 means a default (batch, eval-every) to the
// values used. Unusable settings or data are errors wrapping ErrUsage, one
// naming each setting at fault.
func (c *gptConfig) setup(seed int64) (models.TrainConfig, *models.Dataset, error) {
	mc, err := models.Preset(c.Config)
	if err != nil {
		return models.TrainConfig{}, nil, usageError("--set config=%s: unknown preset (want %s)", c.Config, strings.Join(models.PresetNames(), ", "))
	}
	if c.Precision == "" {
		c.Precision = "f32"
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
		return models.TrainConfig{}, nil, usageError("--set data=%s: %v", c.Data, err)
	}
	mc.Vocab = data.Tok.Vocab()
	if c.EvalEvery == 0 {
		c.EvalEvery = max(1, c.Iters/10)
	}
	tc := models.TrainConfig{Model: mc, Iters: c.Iters, LR: c.LR, Warmup: c.Warmup,
		EvalEvery: c.EvalEvery, EvalBatches: c.EvalBatches, Beta2: c.Beta2, GradClip: c.GradClip, Seed: seed,
		Precision: c.Precision}
	if err := tc.Validate(); err != nil {
		return models.TrainConfig{}, nil, usageError("%v", err)
	}
	if tc.Steps, err = c.schedule(mc, seed); err != nil {
		return models.TrainConfig{}, nil, err
	}
	if tc.Steps != nil && c.Precision != "f32" {
		return models.TrainConfig{}, nil, usageError("--set precision=%s with --set checkpoint=%s: mixed precision and gradient checkpointing do not combine yet; drop one", c.Precision, c.Checkpoint)
	}
	return tc, data, nil
}

// schedule resolves --set checkpoint for the model mc (a budget is
// searched on the chain of fresh parameters and a random batch: sizes and
// times do not depend on the values).
func (c *gptConfig) schedule(mc models.Config, seed int64) (*models.StepSchedule, error) {
	if c.Checkpoint == "" {
		c.Checkpoint = "none"
	}
	if _, err := parseCheckpoint(c.Checkpoint, mc.Layers); err != nil {
		return nil, err
	}
	n := mc.Batch * mc.Block
	idx, tgt := make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i], tgt[i] = int32(i%mc.Vocab), int32((i+1)%mc.Vocab)
	}
	return resolveCheckpoint(c.Checkpoint, mc, models.NewParams(mc, seed), mc.Batch, mc.Block, idx, tgt)
}

// maxBatch bounds --set batch: a batch beyond it needs more memory for the
// activations than a laptop has, at any preset.
const maxBatch = 4096

// validate checks each setting on its own and against the others.
func (c *gptConfig) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	for _, v := range []struct {
		bad bool
		msg string
	}{
		{c.Iters < 1, fmt.Sprintf("--set iters=%d: want at least 1", c.Iters)},
		{!(c.LR > 0) || !finite(c.LR), fmt.Sprintf("--set lr=%v: want a positive number", c.LR)},
		{c.Warmup < 0, fmt.Sprintf("--set warmup=%d: want 0 or more", c.Warmup)},
		{c.Warmup > c.Iters, fmt.Sprintf("warmup=%d is longer than iters=%d: set warmup to at most iters", c.Warmup, c.Iters)},
		{c.Batch < 0 || c.Batch > maxBatch, fmt.Sprintf("--set batch=%d: want 1 to %d, or 0 for the preset's", c.Batch, maxBatch)},
		{!(c.Dropout >= 0 && c.Dropout < 1), fmt.Sprintf("--set dropout=%v: want at least 0 and below 1", c.Dropout)},
		{!(c.Beta2 > 0 && c.Beta2 < 1), fmt.Sprintf("--set beta2=%v: want above 0 and below 1 (the reference's is 0.95)", c.Beta2)},
		{!(c.GradClip >= 0) || !finite(c.GradClip), fmt.Sprintf("--set grad-clip=%v: want 0 (no clipping) or a positive number", c.GradClip)},
		{c.EvalEvery < 0, fmt.Sprintf("--set eval-every=%d: want 0 (iters/10) or more", c.EvalEvery)},
		{c.EvalEvery > c.Iters, fmt.Sprintf("eval-every=%d is longer than iters=%d: the run would validate only at its end; set eval-every to at most iters", c.EvalEvery, c.Iters)},
		{c.EvalBatches < 1, fmt.Sprintf("--set eval-batches=%d: want at least 1", c.EvalBatches)},
		{c.SampleChars < 0 || c.SampleChars > 10_000, fmt.Sprintf("--set sample-chars=%d: want 0 (no sample) to 10000", c.SampleChars)},
		{!(c.Target >= 0) || !finite(c.Target), fmt.Sprintf("--set target=%v: want a val loss above 0, or 0 for none", c.Target)},
		{!slices.Contains(precision.PolicyNames(), c.Precision), fmt.Sprintf("--set precision=%s: want one of %s", c.Precision, strings.Join(precision.PolicyNames(), ", "))},
	} {
		if v.bad {
			return usageError("%s", v.msg)
		}
	}
	return nil
}

func runGPTLab(ctx context.Context, cfg *gptConfig, opt Options) (*reports.Report, error) {
	c := *cfg
	tc, data, err := c.setup(opt.Seed)
	if err != nil {
		return nil, err
	}
	*cfg = c // the report's config shows what ran
	tr, err := models.NewTrainer(tc, data)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	run, err := trainWithProgress(ctx, tr, tc.Iters, opt.Log, "")
	if err != nil {
		return nil, err
	}
	return gptReport(tr, run, c, opt.Seed)
}

// trainRun is what the loop measured.
type trainRun struct {
	first     int             // steps done before this run (a resumed run starts later)
	stepTimes []time.Duration // training steps only, validation excluded
	wall      time.Duration
}

// trainSeconds is the training time (validation excluded) from the start
// of this run until `step` steps were done; false for a step before it.
func (r trainRun) trainSeconds(step int) (float64, bool) {
	n := step - r.first
	if n < 0 || n > len(r.stepTimes) {
		return 0, false
	}
	var d time.Duration
	for _, t := range r.stepTimes[:n] {
		d += t
	}
	return d.Seconds(), true
}

// trainWithProgress runs tr until step `until`, drawing progress on log.
// With ckpt set it saves the trainer there (atomically) after every
// validation and when interrupted.
func trainWithProgress(ctx context.Context, tr *models.Trainer, until int, log io.Writer, ckpt string) (trainRun, error) {
	run := trainRun{first: tr.StepsDone()}
	bar := newProgressBar(log, tr.Cfg.Iters)
	tokens := float64(tr.Cfg.Model.Batch * tr.Cfg.Model.Block)
	var saveErr error
	t0 := time.Now()
	err := tr.Run(ctx, until, func(s models.StepInfo) {
		run.stepTimes = append(run.stepTimes, s.Duration)
		n := len(run.stepTimes)
		mean := time.Since(t0) / time.Duration(n)
		bar.step(s.Step, float64(s.Loss), tokens*float64(n)/time.Since(t0).Seconds(), mean*time.Duration(until-s.Step))
		if !math.IsNaN(s.Val) {
			p := tr.History[len(tr.History)-1]
			bar.eval(s.Step, p.Train, p.Val)
			if ckpt != "" && saveErr == nil {
				saveErr = tr.Save(ckpt)
			}
		}
	})
	bar.clear()
	run.wall = time.Since(t0)
	if ckpt != "" && (err != nil || tr.StepsDone() == until) && saveErr == nil {
		saveErr = tr.Save(ckpt)
	}
	if saveErr != nil {
		return run, usageError("--out: %v", saveErr)
	}
	if errors.Is(err, context.Canceled) {
		if ckpt == "" {
			return run, interruptedf("interrupted at step %d; nothing saved: no --out given", tr.StepsDone())
		}
		return run, interruptedf("interrupted at step %d; checkpoint saved to %s (gptlab gpt train --resume %s continues it)",
			tr.StepsDone(), ckpt, ckpt)
	}
	return run, err
}

// gptReport builds the report of a finished (or stopped) run.
func gptReport(tr *models.Trainer, run trainRun, c gptConfig, seed int64) (*reports.Report, error) {
	data, mc := tr.Data, tr.Cfg.Model
	r := reports.New("gpt", fmt.Sprintf("GPT %d layers × %d wide on %s: loss against the best achievable", mc.Layers, mc.Embd, data.Name))
	last := tr.History[len(tr.History)-1]
	first := tr.History[0]
	steps := len(run.stepTimes)
	tokens := mc.Batch * mc.Block

	r.Metric("parameter_count", tr.Params.Count())
	r.Metric("vocab_size", mc.Vocab)
	r.Metric("train_tokens", len(data.Train))
	r.Metric("steps", tr.StepsDone())
	r.Metric("initial_val_loss_nats", first.Val)
	r.Metric("val_loss_nats", last.Val)
	r.Metric("train_loss_nats", last.Train)
	r.Metric("unigram_entropy_nats", data.UnigramEntropy())
	if steps > 0 {
		med := gptMedian(run.stepTimes)
		var total time.Duration
		for _, d := range run.stepTimes {
			total += d
		}
		r.Metric("median_step_ms", float64(med.Microseconds())/1e3)
		r.Metric("tokens_per_s", float64(tokens*steps)/total.Seconds())
		r.Metric("train_seconds", run.wall.Seconds())
	}

	var oracle []float64
	if src := data.Source; src != nil {
		oracle = tr.OracleLosses()
		r.Metric("entropy_rate_nats", src.EntropyRate())
		r.Metric("block_bound_nats", src.BlockBound(mc.Block))
		r.Metric("oracle_val_loss_nats", gptMean(oracle))
		r.Metric("gap_to_oracle_nats", last.Val-gptMean(oracle))
	}

	t := r.AddTable("Loss curve (nats per character)", reports.Int("step"), reports.Float("train loss", 4),
		reports.Float("val loss", 4), reports.Float("training time (s)", 2))
	reached := -1 // index of the first point at or below the target
	for i, p := range tr.History {
		var secs any // not measured in this run (a resumed run's earlier steps)
		if s, ok := run.trainSeconds(p.Step); ok {
			secs = s
		}
		train := p.Train // NaN at step 0: shown as missing
		t.Row(p.Step, train, p.Val, secs)
		if reached < 0 && c.Target > 0 && p.Val <= c.Target {
			reached = i
		}
	}
	if c.Target > 0 {
		r.Metric("target_val_loss_nats", c.Target)
		if reached < 0 {
			r.Note("The val loss did not reach the target %.4g in %d steps (best %.4f).", c.Target, tr.StepsDone(), bestVal(tr.History))
		} else {
			p := tr.History[reached]
			r.Metric("steps_to_target", p.Step)
			if s, ok := run.trainSeconds(p.Step); ok {
				r.Metric("seconds_to_target", s)
			}
		}
	}

	if src := data.Source; src != nil {
		b := r.AddTable("Best achievable on the embedded corpus", reports.Text("quantity"), reports.Float("nats/char", 4),
			reports.Text("what it is"))
		b.Row("unigram entropy", src.UnigramEntropy(), "best loss from character frequencies alone")
		b.Row("H(X | previous char)", src.ConditionalEntropy(1), "best loss from one character of context")
		b.Row("entropy rate", src.EntropyRate(), "Σ_s π(s)·H(P(·|s)): best loss with unlimited context")
		b.Row(fmt.Sprintf("block bound, T=%d", mc.Block), src.BlockBound(mc.Block), "best mean loss over a window (early positions see less context)")
		b.Row("ideal model on the val batches", gptMean(oracle), "the source's own probabilities on the very tokens the model was scored on")
		b.Row("this model (val)", last.Val, fmt.Sprintf("gap %.3f nats to the ideal model", last.Val-gptMean(oracle)))
	}

	if sampleChars := c.SampleChars; sampleChars > 0 {
		s, err := models.NewSampler(tr.Params, data.Tok)
		if err != nil {
			return nil, err
		}
		text, err := s.Generate("", models.SampleConfig{Tokens: sampleChars, Temperature: 1, Seed: uint64(seed)})
		if err != nil {
			return nil, err
		}
		st := r.AddTable("Sample (temperature 1, from token 0)", reports.Text("from"), reports.Text("text"))
		st.Row("model", fmt.Sprintf("%q", text))
		st.Row("validation text", fmt.Sprintf("%q", data.Tok.Decode(data.Val[:min(sampleChars, len(data.Val))])))
	}

	if len(tr.History) > 1 {
		r.Check("validation loss fell", last.Val < first.Val-0.1,
			"%.4f at step 0 → %.4f at step %d (want a drop of more than 0.1)", first.Val, last.Val, last.Step)
		r.Check("beats the unigram entropy", last.Val < data.UnigramEntropy(),
			"val loss %.4f < %.4f, the best loss from character frequencies alone", last.Val, data.UnigramEntropy())
	}
	if oracle != nil {
		vals, err := tr.ValLosses()
		if err != nil {
			return nil, err
		}
		tol := oracleTolerance(vals, oracle)
		r.Check("no better than the ideal model", last.Val >= gptMean(oracle)-tol,
			"val loss %.4f ≥ ideal model's %.4f on the same batches − %.4f (4 standard errors of the per-batch difference, at least 0.01); beating the source means leakage",
			last.Val, gptMean(oracle), tol)
	} else {
		r.Note("The entropy rate of a text file is unknown, so the report has no bound and no gap; the embedded corpus (no --set data) has both.")
	}
	if tr.StepsDone() < tr.Cfg.Iters {
		r.Note("Stopped at step %d of a %d-step schedule.", tr.StepsDone(), tr.Cfg.Iters)
	}
	if pol, err := tr.Cfg.Policy(); err == nil && pol.Mixed() {
		r.Note("Precision %s: the step's graph stores activations and gradients as %v at every op boundary, reads the matrix products' weights rounded from float32 master weights and keeps AdamW's state in float32 (gptlab run precision compares the policies).", pol.Name, pol.Activations)
	}
	if s := tr.LossScaler(); s != nil {
		r.Metric("loss_scale", s.Scale())
		r.Metric("skipped_steps", s.Skipped())
		r.Note("Dynamic loss scaling (GradScaler's defaults): the scale is %g after %d steps, %d of them skipped for a non-finite gradient.", s.Scale(), s.Steps(), s.Skipped())
	}
	r.Note("Losses are mean cross-entropy in nats per character; val loss is the mean over %d fixed validation batches of %d×%d characters drawn from the last 10%% of the data.", tr.Cfg.EvalBatches, mc.Batch, mc.Block)
	if src := data.Source; src != nil {
		h1 := src.ConditionalEntropy(1)
		switch {
		case math.Abs(last.Val-h1) <= 0.02:
			r.Note("The val loss %.3f is about %.3f, the best loss from one character of context: the model has learned the previous character's information but not yet the second character's.", last.Val, h1)
		case last.Val > h1:
			r.Note("The val loss %.3f is above %.3f, the best loss from one character of context: the model has not yet learned all of the previous character's information, let alone the second character's.", last.Val, h1)
		default:
			r.Note("The val loss %.3f is below %.3f, the best loss from one character of context: the model uses the second character of context too; %.3f nats remain to the ideal model.", last.Val, h1, last.Val-gptMean(oracle))
		}
		r.Note("The embedded corpus is an order-%d Markov chain over %d characters whose rows mix a table on the whole context with tables on single earlier characters (models.DefaultCorpusSpec, seed %d); its entropy rate is computed exactly from the stationary distribution.", data.Source.K, data.Source.A, seed)
	}
	if p, err := lossPlot(tr); err == nil {
		r.AddFigure("loss", p, 16*vg.Centimeter, 10*vg.Centimeter)
	} else {
		return nil, err
	}
	return r, nil
}

// oracleTolerance is how far below the ideal model a correct model may
// land by chance on finitely many batches: 4 standard errors of the mean
// per-batch difference, at least 0.01 nats.
func oracleTolerance(model, oracle []float64) float64 {
	n := len(model)
	d := make([]float64, n)
	for i := range d {
		d[i] = model[i] - oracle[i]
	}
	m := gptMean(d)
	ss := 0.0
	for _, x := range d {
		ss += (x - m) * (x - m)
	}
	se := 0.0
	if n > 1 {
		se = math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	}
	return max(0.01, 4*se)
}

// lossPlot draws the training loss (moving average), the validation loss
// and, on the embedded corpus, the entropy rate and the block bound.
func lossPlot(tr *models.Trainer) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "GPT loss"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "loss (nats/char)"
	train, win := movingAverage(tr.Losses)
	val := make(plotter.XYs, len(tr.History))
	for i, pt := range tr.History {
		val[i] = plotter.XY{X: float64(pt.Step), Y: pt.Val}
	}
	if len(train) > 0 {
		l, err := plotter.NewLine(train)
		if err != nil {
			return nil, err
		}
		l.Color = color.RGBA{R: 70, G: 130, B: 180, A: 255}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("train (mean of %d steps)", win), l)
	}
	vl, vp, err := plotter.NewLinePoints(val)
	if err != nil {
		return nil, err
	}
	vl.Color, vp.Color = color.RGBA{R: 220, G: 90, B: 30, A: 255}, color.RGBA{R: 220, G: 90, B: 30, A: 255}
	p.Add(vl, vp)
	p.Legend.Add("validation", vl, vp)
	xmax := float64(max(1, tr.StepsDone()))
	if src := tr.Data.Source; src != nil {
		for _, h := range []struct {
			name string
			y    float64
			dash []vg.Length
		}{
			{"one-char context", src.ConditionalEntropy(1), []vg.Length{vg.Points(1), vg.Points(3)}},
			{"entropy rate", src.EntropyRate(), []vg.Length{vg.Points(6), vg.Points(3)}},
			{fmt.Sprintf("block bound (T=%d)", tr.Cfg.Model.Block), src.BlockBound(tr.Cfg.Model.Block), []vg.Length{vg.Points(2), vg.Points(2)}},
		} {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: h.y}, {X: xmax, Y: h.y}})
			if err != nil {
				return nil, err
			}
			l.Dashes = h.dash
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s %.3f", h.name, h.y), l)
		}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p, nil
}

// movingAverage is the mean of every win consecutive losses (win = a 50th
// of the run, at least 1), at the step that ends each window.
func movingAverage(losses []float32) (xy plotter.XYs, win int) {
	win = max(1, len(losses)/50)
	xy = make(plotter.XYs, 0, len(losses))
	sum := 0.0
	for i, l := range losses {
		sum += float64(l)
		if i >= win {
			sum -= float64(losses[i-win])
		}
		if i+1 >= win {
			xy = append(xy, plotter.XY{X: float64(i + 1), Y: sum / float64(win)})
		}
	}
	return xy, win
}

func gptMedian(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func gptMean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// bestVal is the lowest validation loss of a history.
func bestVal(h []models.Point) float64 {
	best := math.Inf(1)
	for _, p := range h {
		best = min(best, p.Val)
	}
	return best
}
