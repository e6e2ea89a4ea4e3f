package gpt

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
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

// Defaults: small learns the embedded corpus to within about a tenth of
// a nat of the ideal model in about a minute on 2 cores; --quick trains
// tiny for a few seconds.
var Defaults = lab.Train{
	Config: "small", Iters: 2000, LR: 1e-2, Warmup: 0, Batch: 0, Beta2: 0.95,
	EvalEvery: 0, EvalBatches: 20, SampleChars: 120, Checkpoint: lab.NoCheckpoint, Precision: precision.F32Policy,
}

// Lab is the gpt lab.
var Lab = lab.New("gpt", "the small GPT: train, loss curve against the entropy rate, sample", Defaults, gptQuick, runGPTLab)

// gptQuick shrinks a run to a few seconds on 2 cores: tiny with 16
// sequences a step, at most 1500 steps, at most 10 validation batches.
func gptQuick(c *lab.Train) {
	c.Config = "tiny"
	c.Batch = 16
	c.Iters = min(c.Iters, 1500)
	c.EvalBatches = min(c.EvalBatches, 10)
}

func runGPTLab(ctx context.Context, cfg *lab.Train, opt lab.Options) (*reports.Report, error) {
	c := *cfg
	tc, data, err := c.Setup(opt.Seed)
	if err != nil {
		return nil, err
	}
	*cfg = c // the report's config shows what ran
	tr, err := models.NewTrainer(tc, data)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	run, err := TrainWithProgress(ctx, tr, tc.Iters, opt.Log, "")
	if err != nil {
		return nil, err
	}
	return Report(tr, run, c, opt.Seed)
}

// TrainRun is what the loop measured.
type TrainRun struct {
	first     int             // steps done before this run (a resumed run starts later)
	stepTimes []time.Duration // training steps only, validation excluded
	wall      time.Duration
}

// trainSeconds is the training time (validation excluded) from the start
// of this run until `step` steps were done; false for a step before it.
func (r TrainRun) trainSeconds(step int) (float64, bool) {
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

// TrainWithProgress runs tr until step `until`, drawing progress on log.
// With ckpt set it saves the trainer there (atomically) after every
// validation and when interrupted.
func TrainWithProgress(ctx context.Context, tr *models.Trainer, until int, log io.Writer, ckpt string) (TrainRun, error) {
	run := TrainRun{first: tr.StepsDone()}
	bar := lab.NewProgressBar(log, tr.Cfg.Iters)
	tokens := float64(tr.Cfg.Model.Batch * tr.Cfg.Model.Block)
	var saveErr error
	t0 := time.Now()
	err := tr.Run(ctx, until, func(s models.StepInfo) {
		run.stepTimes = append(run.stepTimes, s.Duration)
		n := len(run.stepTimes)
		mean := time.Since(t0) / time.Duration(n)
		bar.Step(s.Step, float64(s.Loss), tokens*float64(n)/time.Since(t0).Seconds(), mean*time.Duration(until-s.Step))
		if !math.IsNaN(s.Val) {
			p := tr.History[len(tr.History)-1]
			bar.Eval(s.Step, p.Train, p.Val)
			if ckpt != "" && saveErr == nil {
				saveErr = tr.Save(ckpt)
			}
		}
	})
	bar.Clear()
	run.wall = time.Since(t0)
	if ckpt != "" && (err != nil || tr.StepsDone() == until) && saveErr == nil {
		saveErr = tr.Save(ckpt)
	}
	if saveErr != nil {
		return run, lab.Usagef("--out: %v", saveErr)
	}
	if errors.Is(err, context.Canceled) {
		if ckpt == "" {
			return run, lab.Interruptedf("interrupted at step %d; nothing saved: no --out given", tr.StepsDone())
		}
		return run, lab.Interruptedf("interrupted at step %d; checkpoint saved to %s (gptlab gpt train --resume %s continues it)",
			tr.StepsDone(), ckpt, ckpt)
	}
	return run, err
}

// Report builds the report of a finished (or stopped) run.
func Report(tr *models.Trainer, run TrainRun, c lab.Train, seed int64) (*reports.Report, error) {
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
		med := lab.MedianDuration(run.stepTimes)
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
		r.Metric("oracle_val_loss_nats", lab.Mean(oracle))
		r.Metric("gap_to_oracle_nats", last.Val-lab.Mean(oracle))
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
	t.Note("training time: the training steps' own time up to that step, validation excluded; the metric "+
		"train_seconds is the run's wall time (%.2f s), validation, sampling and checkpoints included.", run.wall.Seconds())
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
		b.Row("ideal model on the val batches", lab.Mean(oracle), "the source's own probabilities on the very tokens the model was scored on")
		b.Row("this model (val)", last.Val, fmt.Sprintf("gap %.3f nats to the ideal model", last.Val-lab.Mean(oracle)))
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
		tol := OracleTolerance(vals, oracle)
		r.Check("no better than the ideal model", last.Val >= lab.Mean(oracle)-tol,
			"val loss %.4f ≥ ideal model's %.4f on the same batches − %.4f (4 standard errors of the per-batch difference, at least 0.01); beating the source means leakage",
			last.Val, lab.Mean(oracle), tol)
	} else {
		r.Note("The entropy rate of a text file is unknown, so the report has no bound and no gap; the embedded corpus (no --set data) has both.")
	}
	if tr.StepsDone() < tr.Cfg.Iters {
		r.Note("Stopped at step %d of a %d-step schedule.", tr.StepsDone(), tr.Cfg.Iters)
	}
	if pol := tr.Cfg.Precision; pol.Mixed() {
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
			r.Note("The val loss %.3f is below %.3f, the best loss from one character of context: the model uses the second character of context too; %.3f nats remain to the ideal model.", last.Val, h1, last.Val-lab.Mean(oracle))
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

// OracleTolerance is how far below the ideal model a correct model may
// land by chance on finitely many batches: 4 standard errors of the mean
// per-batch difference, at least 0.01 nats.
func OracleTolerance(model, oracle []float64) float64 {
	n := len(model)
	d := make([]float64, n)
	for i := range d {
		d[i] = model[i] - oracle[i]
	}
	m := lab.Mean(d)
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
	train, win := lab.MovingAverage(tr.Losses)
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

// bestVal is the lowest validation loss of a history.
func bestVal(h []models.Point) float64 {
	best := math.Inf(1)
	for _, p := range h {
		best = min(best, p.Val)
	}
	return best
}
