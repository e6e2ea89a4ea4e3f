package servingengine

import (
	"context"
	"fmt"
	"slices"

	"gptlab/engine"
	"gptlab/experiments/lab"
	"gptlab/reports"
	"gptlab/serving"
)

// Fixed against continuous batching at equal SLOs, on the engine.
//
// Static batching loses goodput in two ways: a batch runs until its
// longest member finishes, and a request that arrives meanwhile waits
// for the whole batch before its first token. On this engine a decode
// iteration's time grows with the rows it runs (a CPU spends its time in
// the rows' arithmetic; an accelerator reads the weights once whatever
// the batch), and a finished member costs nothing, so the first loss is
// small: the second is what remains. Fixed batching then meets a TTFT
// limit only for requests arriving at an idle server or near a batch's
// end: with a per-iteration overhead a, batches of up to L tokens and a
// per-row cost c, a batch lasts D = L·a/(1 − c·L·λ) at λ requests/s, a
// share of about TTFT/D of the requests meets the limit, and fixed's
// goodput λ·TTFT/D peaks at λ = 1/(2cL), where D = 2La: continuous
// batching, which admits at the next iteration, is about 2La/TTFT times
// better there. The lab's TTFT limit is 10 batch-1 iterations, 10(a + c),
// so the ratio goes as L·a/(a + c): it depends on the CPU through how an
// iteration's time divides between its overhead and its rows. On AVX-512
// (Zen 5) a and c were about equal and the engine measured 3.4-3.6x; on
// an AVX2 core a row costs about twice the overhead (the products run at
// a quarter of the rate) and it measured 1.5-2.1x. So the check is that
// continuous batching wins at all, which holds on any CPU unless the
// scheduling is wrong; the 2x target is decided on the same rounds and
// stated beside it as met, missed or undecided. The same runs scored
// with a TTFT limit past any batch's length are the control, where the
// ratio falls to about 1.

// goodputTTFT and goodputTPOT are the derived SLOs in measured iterations
// (where --set slo-ttft, slo-tpot are 0): TTFT within 10 batch-1 decode
// iterations (the time a lone request needs for 10 tokens), TPOT within 3
// batch-32 iterations. controlTTFT is the control's TTFT limit in batch-1
// iterations: longer than a batch of the longest output runs alone.
const (
	goodputTTFT = 10
	goodputTPOT = 3
	controlTTFT = 200
	// goodputRounds is the goodput check's first look (the sampler's default).
	goodputRounds = 10
)

// gpoint is one rate of the goodput sweep: the engine's runs under both
// policies (their recorders, to score at any SLO) and the simulator's.
type gpoint struct {
	rate          float64
	reqs          []serving.Request
	fixed, cont   *serving.Recorder
	simF, simC    serving.Summary
	simFC, simCC  serving.Summary // at the control's SLO
	fixedG, contG float64         // engine goodput at the SLO
}

// goodput sweeps the goodput workload's rates under fixed and continuous
// batching, finds fixed's peak, decides there over rounds of fresh
// arrivals, and puts the simulator (the cost model fitted in the latency
// section) and the control beside it.
func (el *engineLab) goodput(ctx context.Context, r *reports.Report, step32, prefillTPS float64) error {
	cfg := el.cfg
	if el.step1 == 0 {
		_, step, err := el.decodeRun(ctx, 1, cfg.Prompt, cfg.Tokens, "")
		if err != nil {
			return err
		}
		el.step1 = step
	}
	slo := serving.SLO{TTFT: cfg.SLOTTFT.Seconds(), TPOT: cfg.SLOTPOT.Seconds()}
	// Derived limits stay 0 in the config (they are timings, not
	// settings: the config line must not change from run to run); the
	// table's title names the values used.
	if slo.TTFT == 0 {
		slo.TTFT = goodputTTFT * el.step1
	}
	if slo.TPOT == 0 {
		slo.TPOT = goodputTPOT * step32
	}
	control := serving.SLO{TTFT: max(controlTTFT*el.step1, slo.TTFT), TPOT: slo.TPOT}
	capacity := el.capacity(el.gprompt, el.goutput, step32, prefillTPS)
	contCfg, fixedCfg := el.continuousConfig(), engine.Config{Policy: "fixed", MaxSeqs: cfg.MaxSeqs}
	// run serves one workload under both policies, interleaved.
	run := func(rate float64, seed uint64) (*gpoint, error) {
		reqs, err := serving.Workload{N: cfg.GoodputReqs, Rate: rate, CV: cfg.GoodputCV, Prompt: el.gprompt, Output: el.goutput, Seed: seed}.Generate()
		if err != nil {
			return nil, err
		}
		p := &gpoint{rate: rate, reqs: reqs}
		for _, c := range []engine.Config{fixedCfg, contCfg} {
			res, err := el.replay(ctx, reqs, c, rate)
			if err != nil {
				return nil, err
			}
			if c.Policy == "fixed" {
				p.fixed = res.Rec
			} else {
				p.cont = res.Rec
			}
		}
		p.fixedG, p.contG = p.fixed.Summary(slo).Goodput, p.cont.Summary(slo).Goodput
		return p, nil
	}
	var pts []*gpoint
	for i, load := range cfg.GoodputLoads {
		p, err := run(load*capacity, uint64(el.opt.Seed)+0x600+uint64(i))
		if err != nil {
			return err
		}
		for _, s := range []struct {
			c   engine.Config
			slo serving.SLO
			out *serving.Summary
		}{{fixedCfg, slo, &p.simF}, {contCfg, slo, &p.simC}, {fixedCfg, control, &p.simFC}, {contCfg, control, &p.simCC}} {
			if el.costErr != nil { // not calibrated: the columns stay empty
				break
			}
			if *s.out, err = el.simulate(ctx, p.reqs, s.c, el.cost, s.slo); err != nil {
				return err
			}
		}
		pts = append(pts, p)
	}
	peakOf := func(g func(*gpoint) float64) int {
		k := 0
		for i, p := range pts {
			if g(p) > g(pts[k]) {
				k = i
			}
		}
		return k
	}
	ms := func(s float64) float64 { return 1e3 * s }
	t := r.AddTable(fmt.Sprintf("Goodput at TTFT <= %.2f ms and TPOT <= %.2f ms (req/s): fixed batches of %d against continuous, prompts %s, outputs %s",
		ms(slo.TTFT), ms(slo.TPOT), cfg.MaxSeqs, cfg.GoodputPrompt, cfg.GoodputOutput),
		reports.Float("rate (req/s)", 0), reports.Float("fixed", 1), reports.Float("continuous", 1), reports.Float("ratio", 2),
		reports.Float("sim fixed", 1), reports.Float("sim cont.", 1), reports.Float("sim ratio", 2),
		reports.Float("control ratio", 2), reports.Float("sim control", 2))
	for _, p := range pts {
		t.Row(p.rate, p.fixedG, p.contG, ratio(p.contG, p.fixedG), p.simF.Goodput, p.simC.Goodput, ratio(p.simC.Goodput, p.simF.Goodput),
			ratio(p.cont.Summary(control).Goodput, p.fixed.Summary(control).Goodput), ratio(p.simCC.Goodput, p.simFC.Goodput))
	}
	pk := pts[peakOf(func(p *gpoint) float64 { return p.fixedG })]
	t.Note("Goodput: completed requests a second meeting both SLOs (vLLM's definition); the SLOs are %s. Rates are %v of this workload's capacity (%.0f req/s, as in the latency section); %d requests a rate, arrival gaps of CV %g (gamma; 1 is Poisson). The simulator's columns run the same requests with the cost model fitted in the latency section. The control scores the same runs at TTFT <= %.2f ms (%d batch-1 iterations, longer than any batch): there fixed batching's wait for the batch costs no goodput.",
		goodputSLONote(cfg, el.step1, step32), cfg.GoodputLoads, capacity, cfg.GoodputReqs, cfg.GoodputCV, ms(control.TTFT), controlTTFT)
	if pk == pts[len(pts)-1] {
		t.Note("Fixed batching's goodput peaks at the highest rate swept: its true peak may lie beyond it.")
	}

	// Rounds at fixed's peak rate: fresh arrivals each, the sweep's run
	// the first; a round's figure is fixed's goodput over continuous's.
	// The sampler measures the first ten rounds whatever they take; the
	// budget is for the rounds past them, as --set goodput-budget says.
	have := []float64{ratio(pk.fixedG, pk.contG)}
	seed := uint64(el.opt.Seed) + 0x700
	var rounds []*gpoint
	round := func() (float64, error) {
		seed++
		p, err := run(pk.rate, seed)
		if err != nil {
			return 0, err
		}
		rounds = append(rounds, p)
		return ratio(p.fixedG, p.contG), nil
	}
	tm, err := lab.RatioTarget{Target: 1 / goodputWin, Budget: cfg.GoodputBudget, MinRounds: goodputRounds}.Sample(ctx, have, round)
	if err != nil {
		return err
	}
	g := 1 / tm.Median
	all := append([]*gpoint{pk}, rounds...)
	r.Metric("goodput_ratio_continuous_vs_fixed", g)
	simAt := ratio(pk.simC.Goodput, pk.simF.Goodput)
	simText := "the simulator is not calibrated"
	if el.costErr == nil {
		r.Metric("sim_goodput_ratio_continuous_vs_fixed", simAt)
		simText = fmt.Sprintf("the simulator finds %.2fx there", simAt)
	}
	// The control over the same rounds: fixed's peak under its own SLO.
	cpk := pts[peakOf(func(p *gpoint) float64 { return p.fixed.Summary(control).Goodput })]
	cr := ratio(cpk.cont.Summary(control).Goodput, cpk.fixed.Summary(control).Goodput)
	r.Metric("goodput_ratio_control", cr)
	r.TimedCheck(fmt.Sprintf("continuous batching's goodput at least %gx fixed's at fixed's peak rate", goodputWin), tm,
		"%.2fx at %.0f req/s over %d rounds of %d requests (the rounds are fixed's goodput over continuous's, both policies on each round's arrivals); %s; the control (TTFT <= %d batch-1 iterations) %.2fx at its own fixed peak; %s",
		g, pk.rate, tm.Rounds, cfg.GoodputReqs, simText, controlTTFT, cr, roundSpread(all))
	goodputTargetNote(r, all)
	return nil
}

// goodputTarget is the engine's goodput target: continuous batching at
// least this many times fixed's at fixed's peak rate.
const goodputTarget = 2

// goodputWin is what the check asks of continuous batching at fixed's
// peak rate: a win beyond what finishing the same requests sooner gives
// it where no request misses its limits. With limits of 1 s
// (TestGoodputControl) continuous's goodput came out 1.01x fixed's in
// every one of ten rounds, so a check of "more than fixed's" passed its
// own control; the engine measured 1.5-3.4x where the limits bind.
const goodputWin = 1.2

// goodputTargetNote decides the 2x target on the check's rounds (one look
// at 95%) and states it, met, missed or undecided, with its interval: a
// target of the CPU's cost structure (see the comment at the top), not a
// check of the engine.
func goodputTargetNote(r *reports.Report, rounds []*gpoint) {
	var xs []float64
	for _, p := range rounds {
		xs = append(xs, ratio(p.fixedG, p.contG))
	}
	tm := lab.RatioTarget{Target: 1.0 / goodputTarget}.Decide(xs)
	word := lab.TargetWord(tm.Verdict())
	r.Note("Goodput target, continuous batching at least %dx fixed's at fixed's peak rate: %s. Fixed's goodput over continuous's: "+
		"median %.3fx, 95%% interval %.3fx to %.3fx over %d rounds (target at most %.3fx). The ratio goes as a/(a + c), an iteration's "+
		"overhead a against its cost c a row (the latency section's fit): where the rows' arithmetic dominates, as on a CPU without "+
		"AVX-512, continuous batching wins by less.",
		goodputTarget, word, tm.Median, tm.Low, tm.High, tm.Rounds, 1.0/goodputTarget)
}

// roundSpread says how each policy's goodput varied over the rounds, and
// whose varied the more relative to its median: what widens the ratio's
// interval.
func roundSpread(ps []*gpoint) string {
	var f, c []float64
	for _, p := range ps {
		f, c = append(f, p.fixedG), append(c, p.contG)
	}
	rel := func(xs []float64) float64 { return (slices.Max(xs) - slices.Min(xs)) / lab.Median(xs) }
	wider := "fixed's"
	if rel(c) > rel(f) {
		wider = "continuous's"
	}
	return fmt.Sprintf("goodput over the rounds: fixed %.0f to %.0f req/s (median %.0f), continuous %.0f to %.0f (median %.0f); %s varies the more (range over median %.2f against %.2f)",
		slices.Min(f), slices.Max(f), lab.Median(f), slices.Min(c), slices.Max(c), lab.Median(c), wider, max(rel(f), rel(c)), min(rel(f), rel(c)))
}

func goodputSLONote(c *engineConfig, step1, step32 float64) string {
	if c.SLOTTFT == 0 || c.SLOTPOT == 0 {
		return fmt.Sprintf("TTFT within %d batch-1 decode iterations of %.1f µs and TPOT within %d batch-32 iterations of %.0f µs (where --set slo-ttft, slo-tpot are 0), as measured on this machine", goodputTTFT, 1e6*step1, goodputTPOT, 1e6*step32)
	}
	return fmt.Sprintf("--set slo-ttft=%v slo-tpot=%v", c.SLOTTFT, c.SLOTPOT)
}
