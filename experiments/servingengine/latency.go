package servingengine

import (
	"context"
	"fmt"
	"math"

	"gptlab/engine"
	"gptlab/experiments/lab"
	"gptlab/reports"
	"gptlab/serving"
)

// latency replays generated traffic on the wall clock at rates that are
// fractions of the engine's batch-32 decode capacity, under continuous
// and fixed batching; fits serving's cost model on the continuous runs at
// the lowest and highest rate and predicts the others with the simulator;
// compares the two policies' goodput at equal SLOs with the simulator's.
func (el *engineLab) latency(ctx context.Context, r *reports.Report, step32, prefillTPS float64) error {
	cfg := el.cfg
	// A mixed iteration: a batch-32 decode and a full chunk of prefill.
	iter := step32 + float64(cfg.MaxTokens)/prefillTPS
	slo := serving.SLO{TTFT: cfg.SLOTTFT.Seconds(), TPOT: cfg.SLOTPOT.Seconds()}
	// Derived limits stay 0 in the config (they are timings, not
	// settings: the config line must not change from run to run); the
	// goodput table names the values used.
	if slo.TTFT == 0 {
		slo.TTFT = 25 * iter
	}
	if slo.TPOT == 0 {
		slo.TPOT = 3 * iter
	}
	meanOut := float64(el.output.Lo+el.output.Hi) / 2
	meanPrompt := float64(el.prompt.Lo+el.prompt.Hi) / 2
	// requests/s when every output token decodes at batch-32 speed and
	// every prompt token prefills at the best chunk's speed
	capacity := 1 / (meanOut*step32/32 + meanPrompt/prefillTPS)
	contCfg := engine.Config{Policy: "continuous", MaxSeqs: cfg.MaxSeqs, MaxTokens: cfg.MaxTokens, Chunked: true, Watermark: 0.01}
	fixedCfg := engine.Config{Policy: "fixed", MaxSeqs: cfg.MaxSeqs}
	type point struct {
		rate        float64
		reqs        []serving.Request
		cont, fixed serving.Summary
		iters       []engine.IterTime
	}
	var pts []point
	for i, load := range cfg.Loads {
		rate := load * capacity
		reqs, err := serving.Workload{N: cfg.Requests, Rate: rate, CV: 1, Prompt: el.prompt, Output: el.output, Seed: uint64(el.opt.Seed) + uint64(i)}.Generate()
		if err != nil {
			return err
		}
		p := point{rate: rate, reqs: reqs}
		for _, pc := range []engine.Config{contCfg, fixedCfg} {
			e, err := el.engine(pc)
			if err != nil {
				return err
			}
			res, err := engine.Replay(ctx, e, reqs)
			if err != nil {
				return err
			}
			el.finish(e, fmt.Sprintf("%s at %.0f req/s", pc.Policy, rate))
			if pc.Policy == "continuous" {
				p.cont, p.iters = res.Rec.Summary(slo), res.Iters
			} else {
				p.fixed = res.Rec.Summary(slo)
			}
		}
		pts = append(pts, p)
	}
	ms := func(s float64) float64 { return 1e3 * s }
	t := r.AddTable(fmt.Sprintf("Continuous batching on the engine, wall clock: %d requests a rate, prompts %s, outputs %s", cfg.Requests, cfg.PromptLens, cfg.OutputLens),
		reports.Float("rate (req/s)", 0), reports.Float("TTFT p50 ms", 2), reports.Float("p90", 2), reports.Float("TPOT p50 ms", 3),
		reports.Float("p90", 3), reports.Float("ITL p50 ms", 3), reports.Float("E2E p50 ms", 2), reports.Float("p90", 2), reports.Float("out tok/s", 0))
	for _, p := range pts {
		s := p.cont
		t.Row(p.rate, ms(s.TTFT.Median), ms(s.TTFT.P90), ms(s.TPOT.Median), ms(s.TPOT.P90), ms(s.ITL.Median), ms(s.E2E.Median), ms(s.E2E.P90), s.OutputThroughput)
	}
	t.Note("Rates are %v of the capacity measured above (%.0f requests/s of %.0f prompt tokens at the best prefill speed and %.0f output tokens at batch-32 decode speed); Poisson arrivals; %d sequences and %d tokens an iteration at most, chunked prefill; percentiles as vLLM's benchmark_serving.py computes them.", cfg.Loads, capacity, meanPrompt, meanOut, cfg.MaxSeqs, cfg.MaxTokens)

	// The simulator calibrated on the engine.
	var work []serving.Work
	var secs []float64
	for _, i := range []int{0, len(pts) - 1} {
		for _, it := range pts[i].iters {
			work, secs = append(work, it.Work), append(secs, it.Secs)
		}
	}
	cost, rms, dropped, err := robustFit(work, secs)
	if err != nil {
		return fmt.Errorf("fit the cost model on the engine: %w", err)
	}
	// Least squares may give a term a small negative weight (the terms are
	// correlated); a time is never negative: such terms are set to 0.
	var clamped []string
	for _, term := range []struct {
		name string
		v    *float64
	}{{"overhead", &cost.Overhead}, {"prefill token", &cost.PrefillToken}, {"prefill pair", &cost.PrefillPair},
		{"decode token", &cost.DecodeToken}, {"decode context", &cost.DecodeContext}, {"swap block", &cost.SwapBlock}} {
		if *term.v < 0 {
			clamped = append(clamped, fmt.Sprintf("%s (%.3g s)", term.name, *term.v))
			*term.v = 0
		}
	}
	simulate := func(p point, pc engine.Config) (serving.Summary, error) {
		b, err := serving.NewBlocks(serving.BlockConfig{Size: cfg.BlockSize, Device: cfg.Blocks})
		if err != nil {
			return serving.Summary{}, err
		}
		var s serving.Scheduler
		if pc.Policy == "fixed" {
			s, err = serving.NewFixed(b, pc.MaxSeqs)
		} else {
			s, err = serving.NewContinuous(b, serving.ContinuousConfig{MaxSeqs: pc.MaxSeqs, MaxTokens: pc.MaxTokens, Chunked: true, Watermark: 0.01})
		}
		if err != nil {
			return serving.Summary{}, err
		}
		res, err := serving.Simulate(ctx, p.reqs, s, serving.SimConfig{Cost: cost})
		if err != nil {
			return serving.Summary{}, err
		}
		return res.Rec.Summary(slo), nil
	}
	ct := r.AddTable("The simulator calibrated on the engine: predicted at rates not used for the fit",
		reports.Float("rate (req/s)", 0), reports.Text("metric"), reports.Float("engine ms", 3), reports.Float("simulator ms", 3), reports.Percent("error", 1))
	errs := map[string][]float64{}
	for _, p := range pts[1 : len(pts)-1] {
		sim, err := simulate(p, contCfg)
		if err != nil {
			return err
		}
		for _, m := range []struct {
			name     string
			eng, sim float64
		}{
			{"ttft_p50", p.cont.TTFT.Median, sim.TTFT.Median}, {"ttft_p90", p.cont.TTFT.P90, sim.TTFT.P90},
			{"tpot_p50", p.cont.TPOT.Median, sim.TPOT.Median}, {"tpot_p90", p.cont.TPOT.P90, sim.TPOT.P90},
		} {
			e := math.Abs(m.sim-m.eng) / m.eng
			errs[m.name] = append(errs[m.name], e)
			ct.Row(p.rate, m.name, ms(m.eng), ms(m.sim), e)
		}
	}
	ct.Note("serving.Fit on the %d iterations of the runs at %.0f and %.0f req/s, less %d outliers (an iteration more than 4 median absolute residuals slower than the fit: the machine's other processes), rms residual %.1f µs: overhead %.1f µs, %.2f µs a prefill token, %.3f ns a prefill pair, %.2f µs a decode, %.3f ns a token of decode context.",
		len(work), pts[0].rate, pts[len(pts)-1].rate, dropped, 1e6*rms, 1e6*cost.Overhead, 1e6*cost.PrefillToken, 1e9*cost.PrefillPair, 1e6*cost.DecodeToken, 1e9*cost.DecodeContext)
	if len(clamped) > 0 {
		ct.Note("The fit gave negative weights, set to 0: %v.", clamped)
	}
	worst := 0.0
	for _, name := range []string{"ttft_p50", "ttft_p90", "tpot_p50", "tpot_p90"} {
		mean := 0.0
		for _, e := range errs[name] {
			mean += e / float64(len(errs[name]))
		}
		r.Metric("sim_"+name+"_error_ratio", mean)
		worst = max(worst, mean)
	}
	// The target (within 10%, as Vidur reports under 9%) is stated with
	// its figure, not checked: the issue asks for the error and its cause
	// where it is missed, and on a shared 2-core machine it is.
	verdict := "met"
	if worst > 0.10 {
		verdict = "MISSED: iterations of 0.05 to 1 ms are of the size of a descheduling on a shared machine, so the fitted cost model's residuals are as large as the costs it fits"
	}
	r.Note("Simulator calibrated on the engine: largest mean error over the held-out rates %.1f%% (p50/p90 TTFT and TPOT) against a target of 10%%: %s.", 100*worst, verdict)

	// Fixed against continuous at equal SLOs.
	gt := r.AddTable(fmt.Sprintf("Goodput at TTFT <= %.2f ms and TPOT <= %.3f ms: fixed batches of %d against continuous", ms(slo.TTFT), ms(slo.TPOT), cfg.MaxSeqs),
		reports.Float("rate (req/s)", 0), reports.Float("fixed", 1), reports.Float("continuous", 1), reports.Float("ratio", 2),
		reports.Float("sim fixed", 1), reports.Float("sim cont.", 1), reports.Float("sim ratio", 2))
	peak := 0
	simRatios := make([]float64, len(pts))
	for i, p := range pts {
		sf, err := simulate(p, fixedCfg)
		if err != nil {
			return err
		}
		sc, err := simulate(p, contCfg)
		if err != nil {
			return err
		}
		simRatios[i] = ratio(sc.Goodput, sf.Goodput)
		gt.Row(p.rate, p.fixed.Goodput, p.cont.Goodput, ratio(p.cont.Goodput, p.fixed.Goodput), sf.Goodput, sc.Goodput, simRatios[i])
		if p.fixed.Goodput > pts[peak].fixed.Goodput {
			peak = i
		}
	}
	gt.Note("Goodput: completed requests a second meeting both SLOs (vLLM's definition); the SLOs are %s. The simulator's columns run the same requests with the cost model fitted above.", sloNote(el.cfg, iter))
	g, simRatio := ratio(pts[peak].cont.Goodput, pts[peak].fixed.Goodput), simRatios[peak]
	r.Metric("goodput_ratio_continuous_vs_fixed", g)
	// The target (at least 2x, as the serving lab's simulator finds on its
	// own workload) is stated with its figure, not checked: on this
	// workload the simulator itself finds no difference, so the workload
	// does not reach fixed batching's collapse and the comparison cannot
	// show the effect either way.
	verdict = "met"
	if g < 2 {
		verdict = fmt.Sprintf("MISSED; the simulator finds %.2fx on the same workload: its rates and SLOs do not reach the regime where fixed batching collapses", simRatio)
	}
	r.Note("Continuous against fixed goodput at fixed's peak rate: %.2fx at %.0f req/s (fixed %.1f, continuous %.1f req/s) against a target of 2x: %s.", g, pts[peak].rate, pts[peak].fixed.Goodput, pts[peak].cont.Goodput, verdict)
	return nil
}

func sloNote(c *engineConfig, iter float64) string {
	if c.SLOTTFT == 0 || c.SLOTPOT == 0 {
		return fmt.Sprintf("25 and 3 (where --set slo-ttft, slo-tpot are 0) mixed iterations of %.0f µs: a batch-32 decode and a full prefill chunk, as measured on this machine", 1e6*iter)
	}
	return fmt.Sprintf("--set slo-ttft=%v slo-tpot=%v", c.SLOTTFT, c.SLOTPOT)
}

// robustFit is serving.Fit twice: the second time without the iterations
// whose time exceeds the first fit by more than 4 median absolute
// residuals (an iteration descheduled by another process is an outlier,
// not a cost).
func robustFit(work []serving.Work, secs []float64) (serving.Cost, float64, int, error) {
	cost, rms, err := serving.Fit(work, secs)
	if err != nil {
		return cost, rms, 0, err
	}
	res := make([]float64, len(work))
	for i, w := range work {
		res[i] = math.Abs(secs[i] - cost.Time(w))
	}
	mad := lab.Median(res)
	var kw []serving.Work
	var ks []float64
	for i, w := range work {
		if secs[i]-cost.Time(w) <= 4*mad {
			kw, ks = append(kw, w), append(ks, secs[i])
		}
	}
	cost, rms, err = serving.Fit(kw, ks)
	return cost, rms, len(work) - len(kw), err
}
