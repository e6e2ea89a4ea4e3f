package servingengine

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gptlab/engine"
	"gptlab/experiments/lab"
	"gptlab/reports"
	"gptlab/serving"
)

// latency replays generated traffic on the wall clock at rates that are
// fractions of the engine's batch-32 decode capacity under continuous
// batching, fits serving's cost model on the runs at the lowest and
// highest rate and predicts the others with the simulator. The fitted
// model is kept for the goodput section.
func (el *engineLab) latency(ctx context.Context, r *reports.Report, step32, prefillTPS float64) error {
	cfg := el.cfg
	capacity := el.capacity(el.prompt, el.output, step32, prefillTPS)
	contCfg := el.continuousConfig()
	type point struct {
		rate  float64
		reqs  []serving.Request
		runs  []serving.Summary
		cont  serving.Summary // the runs' median of each figure
		iters []engine.IterTime
		// outside the iterations: late wakes for arrivals, gaps between iterations
		wake, gaps []float64
	}
	pts := make([]point, len(cfg.Loads))
	for i, load := range cfg.Loads {
		rate := load * capacity
		reqs, err := serving.Workload{N: cfg.Requests, Rate: rate, CV: 1, Prompt: el.prompt, Output: el.output, Seed: uint64(el.opt.Seed) + uint64(i)}.Generate()
		if err != nil {
			return err
		}
		pts[i] = point{rate: rate, reqs: reqs}
	}
	// The rates interleaved, each repeated on the same requests: a spell
	// of load from the machine's other processes falls on one repeat of
	// several rates, not on every repeat of one.
	for range cfg.LatencyReps {
		for i := range pts {
			res, err := el.replay(ctx, pts[i].reqs, contCfg, pts[i].rate)
			if err != nil {
				return err
			}
			pts[i].runs = append(pts[i].runs, res.Rec.Summary(serving.SLO{}))
			pts[i].iters = append(pts[i].iters, res.Iters...)
			pts[i].wake, pts[i].gaps = append(pts[i].wake, res.Wake...), append(pts[i].gaps, res.Gaps...)
		}
	}
	for i := range pts {
		pts[i].cont = medianSummary(pts[i].runs)
	}
	ms := func(s float64) float64 { return 1e3 * s }
	t := r.AddTable(fmt.Sprintf("Continuous batching on the engine, wall clock: %d requests a rate, prompts %s, outputs %s", cfg.Requests, cfg.PromptLens, cfg.OutputLens),
		reports.Float("rate (req/s)", 0), reports.Float("TTFT p50 ms", 2), reports.Float("p90", 2), reports.Float("TPOT p50 ms", 3),
		reports.Float("p90", 3), reports.Float("ITL p50 ms", 3), reports.Float("E2E p50 ms", 2), reports.Float("p90", 2), reports.Float("out tok/s", 0))
	for _, p := range pts {
		s := p.cont
		t.Row(p.rate, ms(s.TTFT.Median), ms(s.TTFT.P90), ms(s.TPOT.Median), ms(s.TPOT.P90), ms(s.ITL.Median), ms(s.E2E.Median), ms(s.E2E.P90), s.OutputThroughput)
	}
	meanPrompt, meanOut := meanLengths(el.prompt, el.output)
	t.Note("Rates are %v of the capacity measured above (%.0f requests/s of %.1f prompt tokens at the best prefill speed and %.1f output tokens at batch-32 decode speed); Poisson arrivals; %d sequences and %d tokens an iteration at most, chunked prefill; percentiles as vLLM's benchmark_serving.py computes them, each the median of %d runs of the same requests (the rates interleaved).", cfg.Loads, capacity, meanPrompt, meanOut, cfg.MaxSeqs, cfg.MaxTokens, cfg.LatencyReps)

	// The simulator calibrated on the engine.
	var work []serving.Work
	var secs []float64
	for _, i := range []int{0, len(pts) - 1} {
		for _, it := range pts[i].iters {
			work, secs = append(work, it.Work), append(secs, it.Secs)
		}
	}
	cost, rms, dropped, zeroed, err := robustFit(work, secs)
	if err == nil {
		err = cost.Validate() // e.g. every term that takes time held at 0
	}
	mid := pts[len(pts)/2]
	el.httpRate, el.httpReqs = mid.rate, mid.reqs
	if err != nil {
		// The fit's terms come from the lengths' variety and the iterations'
		// number: fixed lengths repeat a few shapes, too few for its terms,
		// and a small model's iterations are mostly noise.
		el.costErr = err
		r.Note("The simulator is not calibrated: the cost model cannot be fitted on the %d iterations of the runs at %.0f and %.0f req/s (prompts %s, outputs %s, %d requests): %v.",
			len(work), pts[0].rate, pts[len(pts)-1].rate, cfg.PromptLens, cfg.OutputLens, cfg.Requests, err)
		return nil
	}
	ct := r.AddTable("The simulator calibrated on the engine: predicted at rates not used for the fit",
		reports.Float("rate (req/s)", 0), reports.Text("metric"), reports.Float("engine ms", 3), reports.Float("simulator ms", 3), reports.Percent("error", 1))
	errs := map[string][]float64{}
	for _, p := range pts[1 : len(pts)-1] {
		sim, err := el.simulate(ctx, p.reqs, contCfg, cost, serving.SLO{})
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
	ct.Note("serving.FitNonNegative on the %d iterations of the runs at %.0f and %.0f req/s, less %d outliers (an iteration more than 4 median absolute residuals slower than the fit: the machine's other processes), rms residual %.1f µs: overhead %.1f µs, %.2f µs a prefill token, %.3f ns a prefill pair, %.2f µs a decode, %.3f ns a token of decode context.",
		len(work), pts[0].rate, pts[len(pts)-1].rate, dropped, 1e6*rms, 1e6*cost.Overhead, 1e6*cost.PrefillToken, 1e9*cost.PrefillPair, 1e6*cost.DecodeToken, 1e9*cost.DecodeContext)
	tot, pred := 0.0, 0.0
	for i, w := range work {
		tot, pred = tot+secs[i], pred+cost.Time(w)
	}
	var wake, gaps []float64
	for _, p := range pts[1 : len(pts)-1] {
		wake, gaps = append(wake, p.wake...), append(gaps, p.gaps...)
	}
	ct.Note("Outside the cost model: the fitted runs' iterations took %.1f%% longer in all than the fit predicts for them (the outliers it leaves out happen in the engine's latencies too); at the held-out rates, the replay wakes for an arrival at an idle engine %s late (p50, p90 of %d wakes) and spends %s between busy iterations (p50, p90 of %d: admitting, recording); the simulator admits at the arrival and runs iterations back to back.",
		100*(tot/pred-1), pair(wake), len(wake), pair(gaps), len(gaps))
	if len(zeroed) > 0 {
		ct.Note("Held at 0 by the non-negative fit (least squares gave them a negative weight: the terms are correlated): %v.", zeroed)
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
		its := make([]float64, len(secs))
		copy(its, secs)
		medIter := lab.Median(its)
		verdict = fmt.Sprintf("MISSED: the engine's iterations in the fitted runs took %.1f%% longer in all than the fit predicts, the %d outliers it leaves out (%.1f%% of them, each over 4 median absolute residuals slower than the fit) lengthening the engine's latencies and not the simulator's; the fit's rms residual is %.0f%% of the median iteration (%.0f µs), and a decode's cost is not linear in its rows (%.0f µs at batch 1, %.1f µs a row at batch 32)",
			100*(tot/pred-1), dropped, 100*float64(dropped)/float64(len(work)), 100*rms/medIter, 1e6*medIter, 1e6*el.step1, 1e6*step32/32)
	}
	r.Note("Simulator calibrated on the engine: largest mean error over the held-out rates %.1f%% (p50/p90 TTFT and TPOT) against a target of 10%%: %s.", 100*worst, verdict)

	el.cost = cost
	return nil
}

// medianSummary is the median over runs of each latency percentile and
// of the output throughput.
func medianSummary(runs []serving.Summary) serving.Summary {
	med := func(f func(s serving.Summary) float64) float64 {
		xs := make([]float64, len(runs))
		for i, s := range runs {
			xs[i] = f(s)
		}
		return lab.Median(xs)
	}
	var m serving.Summary
	for _, d := range []struct {
		out *serving.Dist
		of  func(s serving.Summary) serving.Dist
	}{
		{&m.TTFT, func(s serving.Summary) serving.Dist { return s.TTFT }}, {&m.TPOT, func(s serving.Summary) serving.Dist { return s.TPOT }},
		{&m.ITL, func(s serving.Summary) serving.Dist { return s.ITL }}, {&m.E2E, func(s serving.Summary) serving.Dist { return s.E2E }},
	} {
		d.out.Median = med(func(s serving.Summary) float64 { return d.of(s).Median })
		d.out.P90 = med(func(s serving.Summary) float64 { return d.of(s).P90 })
		d.out.P99 = med(func(s serving.Summary) float64 { return d.of(s).P99 })
	}
	m.OutputThroughput = med(func(s serving.Summary) float64 { return s.OutputThroughput })
	return m
}

// capacity is the requests/s of a workload when every output token
// decodes at batch-32 speed and every prompt token prefills at the best
// chunk's speed.
func (el *engineLab) capacity(prompt, output serving.Lengths, step32, prefillTPS float64) float64 {
	p, o := meanLengths(prompt, output)
	return 1 / (o*step32/32 + p/prefillTPS)
}

// meanLengths is the mean prompt and output length of 10,000 requests
// drawn from the distributions (a fixed seed: the same means every run).
func meanLengths(prompt, output serving.Lengths) (p, o float64) {
	reqs, err := serving.Workload{N: 10000, Prompt: prompt, Output: output, Seed: 1}.Generate()
	if err != nil {
		panic(fmt.Sprintf("servingengine: lengths validated at start: %v", err))
	}
	for _, q := range reqs {
		p, o = p+float64(q.Prompt)/float64(len(reqs)), o+float64(q.Output)/float64(len(reqs))
	}
	return p, o
}

// pair is the p50 and p90 of xs seconds in µs, or "-" for none.
func pair(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q := func(f float64) float64 { return 1e6 * s[min(len(s)-1, int(f*float64(len(s))))] }
	return fmt.Sprintf("%.0f and %.0f µs", q(0.5), q(0.9))
}

// continuousConfig is the latency and goodput runs' continuous batching.
func (el *engineLab) continuousConfig() engine.Config {
	return engine.Config{Policy: "continuous", MaxSeqs: el.cfg.MaxSeqs, MaxTokens: el.cfg.MaxTokens, Chunked: true, Watermark: 0.01}
}

// replay serves reqs on the wall clock under c and checks its blocks.
func (el *engineLab) replay(ctx context.Context, reqs []serving.Request, c engine.Config, rate float64) (*engine.ReplayResult, error) {
	e, err := el.engine(c)
	if err != nil {
		return nil, err
	}
	res, err := engine.Replay(ctx, e, reqs)
	if err != nil {
		return nil, err
	}
	el.finish(e, fmt.Sprintf("%s at %.0f req/s", c.Policy, rate))
	return res, nil
}

// simulate runs reqs through serving's simulator under c's policy with
// cost, over a pool like the engine's.
func (el *engineLab) simulate(ctx context.Context, reqs []serving.Request, c engine.Config, cost serving.Cost, slo serving.SLO) (serving.Summary, error) {
	b, err := serving.NewBlocks(serving.BlockConfig{Size: el.cfg.BlockSize, Device: el.cfg.Blocks})
	if err != nil {
		return serving.Summary{}, err
	}
	var s serving.Scheduler
	if c.Policy == "fixed" {
		s, err = serving.NewFixed(b, c.MaxSeqs)
	} else {
		s, err = serving.NewContinuous(b, serving.ContinuousConfig{MaxSeqs: c.MaxSeqs, MaxTokens: c.MaxTokens, Chunked: c.Chunked, Watermark: c.Watermark})
	}
	if err != nil {
		return serving.Summary{}, err
	}
	res, err := serving.Simulate(ctx, reqs, s, serving.SimConfig{Cost: cost})
	if err != nil {
		return serving.Summary{}, err
	}
	return res.Rec.Summary(slo), nil
}

// robustFit is serving.FitNonNegative twice: the second time without the
// iterations whose time exceeds the first fit by more than 4 median
// absolute residuals (an iteration descheduled by another process is an
// outlier, not a cost).
func robustFit(work []serving.Work, secs []float64) (serving.Cost, float64, int, []string, error) {
	cost, rms, _, err := serving.FitNonNegative(work, secs)
	if err != nil {
		return cost, rms, 0, nil, err
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
	cost, rms, zeroed, err := serving.FitNonNegative(kw, ks)
	return cost, rms, len(work) - len(kw), zeroed, err
}
