package serving

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/internal/cputime"
	"gptlab/reports"
	"gptlab/serving"
)

// This file is the serving lab: the simulator of package serving run on
// generated traffic (and a user's trace), fixed (static) batching against
// continuous batching across arrival rates and KV budgets, the paged KV
// cache's waste against the contiguous max-length reservation, prefix
// caching on shared prompts, the preemption modes, a three-request example
// small enough to check by hand, and the simulator's own speed. Times come
// from serving.DefaultCost; metrics are vLLM's benchmark_serving.py's.

type servingConfig struct {
	Requests    int           `set:"requests" help:"requests in each simulated run"`
	Rates       []float64     `set:"rates" help:"arrival rates swept (requests/s)"`
	Budgets     []int         `set:"budgets" help:"KV budgets swept (blocks); the middle one is the reference"`
	Batches     []int         `set:"batches" help:"fixed batch sizes tried; each rate reports the best"`
	BlockSize   int           `set:"block-size" help:"tokens per KV block"`
	Prompt      string        `set:"prompt" help:"prompt lengths: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA:CAP or zipf:S:LO:HI"`
	Output      string        `set:"output" help:"output lengths (max_tokens), same forms"`
	CV          float64       `set:"cv" help:"coefficient of variation of arrival gaps (1: Poisson, above: burstier)"`
	CancelFrac  float64       `set:"cancel-frac" help:"fraction of requests their client cancels"`
	CancelAfter time.Duration `set:"cancel-after" help:"mean time from arrival to a cancel"`
	SLOTTFT     time.Duration `set:"slo-ttft" help:"goodput's limit on time to first token"`
	SLOTPOT     time.Duration `set:"slo-tpot" help:"goodput's limit on time per output token"`
	MaxSeqs     int           `set:"max-seqs" help:"continuous: sequences running at once"`
	MaxTokens   int           `set:"max-tokens" help:"continuous: tokens per iteration"`
	MaxLen      int           `set:"max-len" help:"tokens the contiguous baseline reserves per request"`
	Groups      int           `set:"groups" help:"shared prefixes in the prefix-caching workload"`
	PrefixLen   int           `set:"prefix-len" help:"tokens of each shared prefix"`
	SimRequests int           `set:"sim-requests" help:"requests in the largest simulator-speed run"`
	Check       bool          `set:"check" help:"run the invariant checker after every iteration of every run"`
	Trace       string        `set:"trace" help:"CSV trace (arrival_s,prompt_tokens,output_tokens[,cancel_s]) to run as well"`
}

var servingDefaults = servingConfig{
	Requests: 2000, Rates: []float64{0.25, 0.5, 1, 2, 4, 8, 12, 16}, Budgets: []int{1024, 2048, 4096},
	Batches: []int{8, 16, 32, 64, 128}, BlockSize: 16, Prompt: "lognormal:128:1:1024", Output: "lognormal:128:1:1024",
	CV: 1, CancelFrac: 0.02, CancelAfter: 10 * time.Second, SLOTTFT: 2 * time.Second, SLOTPOT: 100 * time.Millisecond,
	MaxSeqs: 256, MaxTokens: 2048, MaxLen: 2048, Groups: 8, PrefixLen: 200, SimRequests: 1_000_000,
}

// Lab is the serving lab.
var Lab = lab.New("serving", "paged-KV serving simulator: fixed vs continuous batching", servingDefaults, servingQuick, runServing)

// servingQuick sweeps three rates on the reference budget with fewer,
// and fewer batch sizes, and times the simulator on 20000 requests.
func servingQuick(c *servingConfig) {
	c.Requests, c.Rates, c.Budgets, c.Batches, c.SimRequests = 400, []float64{0.5, 2, 8}, []int{2048}, []int{8, 32}, 20_000
}

// servingLab holds what the sections share.
type servingLab struct {
	cfg            *servingConfig
	prompt, output serving.Lengths
	slo            serving.SLO
	seed           uint64
	runs, checks   int // simulations run, invariant checks they ran
	unaccounted    []string
	status         *lab.Status // a sign of life on a terminal during a long trace
}

func runServing(ctx context.Context, cfg *servingConfig, opt lab.Options) (*reports.Report, error) {
	sl, err := newServingLab(cfg, opt)
	if err != nil {
		return nil, err
	}
	r := reports.New("serving", "Serving simulator: paged KV blocks, fixed against continuous batching")
	var sweep *servingSweep
	steps := []func() error{
		func() error { return sl.handExample(ctx, r) },
		func() (err error) { sweep, err = sl.sweep(ctx, r); return err },
		func() error { return sl.waste(ctx, r, sweep) },
		func() error { return sl.prefix(ctx, r, sweep) },
		func() error { return sl.preemption(ctx, r, sweep) },
		func() error { return sl.trace(ctx, r) },
		func() error { return sl.speed(ctx, r) },
	}
	where := "after every iteration of the example and at the end of every run"
	if cfg.Check {
		where = "after every iteration of every run"
	}
	for _, step := range steps {
		err := step()
		if errors.Is(err, serving.ErrInvariant) {
			// A broken invariant is a failed check, not a crash: the report
			// says where, and the lab stops there.
			r.Check("invariants held", false, "%v", err)
			r.Note("The lab stopped at the first broken invariant; the sections after it did not run.")
			return r, nil
		}
		if err != nil {
			return nil, err
		}
	}
	r.Check("invariants held", sl.checks >= sl.runs, "%d runs, %d invariant checks (%s): reference counts, sharing only of sealed blocks, the cache and free lists, table contents; every block free or cached at the end",
		sl.runs, sl.checks, where)
	r.Check("every request accounted for in every run", len(sl.unaccounted) == 0,
		"%d runs: completed + cancelled + rejected = requests%s", sl.runs, strings.Join(sl.unaccounted, "; "))
	r.Note("Iteration times come from a linear cost model of a 7B model on one accelerator (serving.DefaultCost: 12 ms overhead, 70 µs per token, 0.35 µs per token of context a decode reads, 3.5 ns per prefill attention pair, 0.32 ms per swapped block), not from a model. Metrics are vLLM's benchmark_serving.py's: TTFT, TPOT = (E2E − TTFT)/(output − 1) per request, ITL pooled over every token gap, E2E; only completed requests count, and goodput is completed requests per second meeting TTFT ≤ %v and TPOT ≤ %v.", cfg.SLOTTFT, cfg.SLOTPOT)
	return r, nil
}

func newServingLab(cfg *servingConfig, opt lab.Options) (*servingLab, error) {
	switch {
	case cfg.Requests < 10 || cfg.Requests > 1_000_000:
		return nil, lab.Usagef("--set requests=%d: want 10 to 1000000", cfg.Requests)
	case len(cfg.Rates) == 0 || slices.ContainsFunc(cfg.Rates, func(x float64) bool { return !(x > 0 && x <= 1e6) }):
		return nil, lab.Usagef("--set rates=%v: want one or more rates in (0, 1e6] requests/s", cfg.Rates)
	case len(cfg.Budgets) == 0 || slices.ContainsFunc(cfg.Budgets, func(b int) bool { return b < 2 || b > 1<<20 }):
		return nil, lab.Usagef("--set budgets=%v: want one or more budgets of 2 to 1048576 blocks", cfg.Budgets)
	case len(cfg.Batches) == 0 || slices.ContainsFunc(cfg.Batches, func(b int) bool { return b < 1 || b > 4096 }):
		return nil, lab.Usagef("--set batches=%v: want one or more batch sizes of 1 to 4096", cfg.Batches)
	case cfg.BlockSize < 1 || cfg.BlockSize > 1024:
		return nil, lab.Usagef("--set block-size=%d: want 1 to 1024", cfg.BlockSize)
	case !(cfg.CV > 0 && cfg.CV <= 100):
		return nil, lab.Usagef("--set cv=%g: want (0, 100]", cfg.CV)
	case !(cfg.CancelFrac >= 0 && cfg.CancelFrac <= 1) || (cfg.CancelFrac > 0 && cfg.CancelAfter <= 0):
		return nil, lab.Usagef("--set cancel-frac=%g cancel-after=%v: want a fraction and a positive time", cfg.CancelFrac, cfg.CancelAfter)
	case cfg.SLOTTFT <= 0 || cfg.SLOTPOT <= 0:
		return nil, lab.Usagef("--set slo-ttft=%v slo-tpot=%v: want positive limits", cfg.SLOTTFT, cfg.SLOTPOT)
	case slices.Max(cfg.Budgets)*cfg.BlockSize > 1<<26:
		return nil, lab.Usagef("--set budgets=%v block-size=%d: more than 2^26 token slots", cfg.Budgets, cfg.BlockSize)
	case cfg.MaxSeqs < 1 || cfg.MaxSeqs > 1<<16 || cfg.MaxTokens < 1 || cfg.MaxTokens > 1<<20:
		return nil, lab.Usagef("--set max-seqs=%d max-tokens=%d: want 1 to 65536 sequences and 1 to 1048576 tokens", cfg.MaxSeqs, cfg.MaxTokens)
	case cfg.MaxLen < 1 || cfg.MaxLen > 1<<20:
		return nil, lab.Usagef("--set max-len=%d: want 1 to 1048576", cfg.MaxLen)
	case cfg.Groups < 1 || cfg.Groups > 1_000_000 || cfg.PrefixLen < 1 || cfg.PrefixLen > 1<<16:
		return nil, lab.Usagef("--set groups=%d prefix-len=%d: want 1 to 1000000 groups and a prefix of 1 to 65536 tokens", cfg.Groups, cfg.PrefixLen)
	case cfg.SimRequests < 1000 || cfg.SimRequests > 2_000_000:
		return nil, lab.Usagef("--set sim-requests=%d: want 1000 to 2000000", cfg.SimRequests)
	}
	sl := &servingLab{cfg: cfg, seed: uint64(opt.Seed), status: lab.NewStatus(opt.Log),
		slo: serving.SLO{TTFT: cfg.SLOTTFT.Seconds(), TPOT: cfg.SLOTPOT.Seconds()}}
	var err error
	if sl.prompt, err = serving.ParseLengths(cfg.Prompt); err != nil {
		return nil, lab.Usagef("--set prompt=%s: %v", cfg.Prompt, err)
	}
	if sl.output, err = serving.ParseLengths(cfg.Output); err != nil {
		return nil, lab.Usagef("--set output=%s: %v", cfg.Output, err)
	}
	if longest := sl.prompt.Hi + sl.output.Hi - 1; longest > cfg.MaxLen {
		return nil, lab.Usagef("--set max-len=%d: the contiguous baseline cannot hold the longest request, %d tokens of KV (prompt cap + output cap - 1)", cfg.MaxLen, longest)
	}
	return sl, nil
}

// workload draws the lab's traffic at a rate. The shared-prefix workload
// has no cancellations, so that runs with and without the cache do the same
// work but for what the cache finds.
func (sl *servingLab) workload(n int, rate float64, shared bool) []serving.Request {
	w := serving.Workload{N: n, Rate: rate, CV: sl.cfg.CV, Prompt: sl.prompt, Output: sl.output,
		CancelFrac: sl.cfg.CancelFrac, CancelAfter: sl.cfg.CancelAfter.Seconds(), Seed: sl.seed}
	if shared {
		w.Groups, w.PrefixLen, w.CancelFrac = sl.cfg.Groups, sl.cfg.PrefixLen, 0
	}
	reqs, err := w.Generate()
	if err != nil {
		panic(fmt.Sprintf("serving lab: workload validated but not generated: %v", err)) // the settings were checked
	}
	return reqs
}

// policy is one way of serving: a scheduler over a block layout.
type policy struct {
	fixed       int  // batch size of static batching; 0: continuous
	blocks      int  // device blocks of BlockSize (paged) or tokens/MaxLen (contiguous)
	blockSize   int  // 0: the lab's
	contiguous  bool // reserve MaxLen per request
	caching     bool
	swap        bool
	chunked     bool
	chunkTokens int
}

func (sl *servingLab) scheduler(p policy) (serving.Scheduler, error) {
	bs := p.blockSize
	if bs == 0 {
		bs = sl.cfg.BlockSize
	}
	var m *serving.Blocks
	var err error
	if p.contiguous {
		m, err = serving.Contiguous(sl.cfg.MaxLen, p.blocks*sl.cfg.BlockSize, 0)
	} else {
		host := 0
		if p.swap {
			host = p.blocks // room for every block the device holds: a swap never falls back to recompute
		}
		m, err = serving.NewBlocks(serving.BlockConfig{Size: bs, Device: p.blocks * sl.cfg.BlockSize / bs, Host: host, Caching: p.caching})
	}
	if err != nil {
		return nil, lab.Usagef("KV budget: %v", err)
	}
	if p.fixed > 0 {
		return serving.NewFixed(m, p.fixed)
	}
	c := serving.ContinuousConfig{MaxSeqs: sl.cfg.MaxSeqs, MaxTokens: sl.cfg.MaxTokens, Swap: p.swap, Chunked: p.chunked, Watermark: 0.01}
	if p.chunked {
		c.MaxTokens = p.chunkTokens
	}
	s, err := serving.NewContinuous(m, c)
	if err != nil {
		return nil, lab.Usagef("%v", err)
	}
	return s, nil
}

// outcome is one simulated run.
type outcome struct {
	res *serving.Result
	sum serving.Summary
	p   policy
}

func (sl *servingLab) simulate(ctx context.Context, reqs []serving.Request, p policy, timeline bool) (*outcome, error) {
	s, err := sl.scheduler(p)
	if err != nil {
		return nil, err
	}
	res, err := serving.Simulate(ctx, reqs, s, serving.SimConfig{Cost: serving.DefaultCost, Check: sl.cfg.Check || timeline, Timeline: timeline})
	if err != nil {
		return nil, err
	}
	o := &outcome{res: res, sum: res.Rec.Summary(sl.slo), p: p}
	sl.runs++
	sl.checks += res.Checks
	if n := o.sum.Completed + o.sum.Cancelled + o.sum.Rejected; n != len(reqs) {
		sl.unaccounted = append(sl.unaccounted, fmt.Sprintf("%d of %d requests accounted for", n, len(reqs)))
	}
	return o, nil
}

// ---- the hand example -------------------------------------------------

// servingHandCost makes the example's times whole milliseconds.
var servingHandCost = serving.Cost{Overhead: 10e-3, PrefillToken: 1e-3, DecodeToken: 2e-3}

// servingHandRequests are the example's three requests.
var servingHandRequests = []serving.Request{
	{ID: 0, Arrival: 0, Prompt: 6, Output: 4},
	{ID: 1, Arrival: 0.005, Prompt: 3, Output: 3},
	{ID: 2, Arrival: 0.020, Prompt: 5, Output: 2},
}

// servingHand simulates the example: continuous batching over 5 blocks of
// 4 tokens, no watermark, no prefix caching, the invariants checked after
// every iteration.
func servingHand(ctx context.Context) (*serving.Result, error) {
	m, err := serving.NewBlocks(serving.BlockConfig{Size: 4, Device: 5})
	if err != nil {
		return nil, err
	}
	s, err := serving.NewContinuous(m, serving.ContinuousConfig{MaxSeqs: 4, MaxTokens: 16})
	if err != nil {
		return nil, err
	}
	return serving.Simulate(ctx, slices.Clone(servingHandRequests), s, serving.SimConfig{Cost: servingHandCost, Check: true, Timeline: true})
}

func (sl *servingLab) handExample(ctx context.Context, r *reports.Report) error {
	res, err := servingHand(ctx)
	if err != nil {
		return err
	}
	sl.runs++
	sl.checks += res.Checks
	name := func(id int) string { return string(rune('A' + id)) }
	ms := func(s float64) float64 { return math.Round(s*1e6) / 1e3 }
	t := r.AddTable("A hand-checkable example: three requests, blocks of 4 tokens, a budget of 5 blocks",
		reports.Int("iteration"), reports.Float("start (ms)", 0), reports.Float("end (ms)", 0), reports.Text("work"),
		reports.Int("blocks"), reports.Text("events"))
	preempted := map[int]bool{}
	first, last := map[int]float64{}, map[int]float64{}
	for _, it := range res.Timeline {
		var work, events []string
		for _, e := range it.Entries {
			p := servingHandRequests[e.Req].Prompt
			switch {
			case e.N == 1 && e.Start >= p:
				work = append(work, fmt.Sprintf("%s decode %d", name(e.Req), e.Start))
			case preempted[e.Req]:
				work = append(work, fmt.Sprintf("%s recompute %d-%d", name(e.Req), e.Start, e.Start+e.N-1))
			default:
				work = append(work, fmt.Sprintf("%s prefill %d-%d", name(e.Req), e.Start, e.Start+e.N-1))
			}
			if e.Sample {
				if _, ok := first[e.Req]; !ok {
					first[e.Req] = it.End
				}
				last[e.Req] = it.End
			}
		}
		for _, id := range it.Preempted {
			preempted[id] = true
			events = append(events, name(id)+" preempted")
		}
		for _, id := range it.Finished {
			events = append(events, name(id)+" done")
		}
		t.Row(it.Index, ms(it.Start), ms(it.End), strings.Join(work, ", "), it.UsedBlocks, strings.Join(events, ", "))
	}
	t.Note("Cost: 10 ms per iteration + 1 ms per prefill token + 2 ms per decode. Arrivals: A at 0 ms (prompt 6, output 4), B at 5 ms (3, 3), C at 20 ms (5, 2). Positions count from 0; a decode at position p writes the KV of token p. In iteration 4 A's ninth token needs a third block and none is free: C, the most recently admitted, is preempted and later recomputed (its prompt and its first token).")
	per := r.AddTable("The example's requests (recorder against the timeline above)",
		reports.Text("request"), reports.Float("TTFT (ms)", 1), reports.Float("TPOT (ms)", 1), reports.Float("E2E (ms)", 1))
	sum := res.Rec.Summary(serving.SLO{})
	var ttft, e2e []float64 // from the timeline
	for id, q := range servingHandRequests {
		a, b := first[id]-q.Arrival, last[id]-q.Arrival
		per.Row(name(id), 1e3*a, 1e3*(b-a)/float64(q.Output-1), 1e3*b)
		ttft, e2e = append(ttft, a), append(e2e, b)
	}
	recTTFT, recE2E := res.Rec.TTFT(), res.Rec.E2E() // in completion order
	for _, x := range [][]float64{ttft, e2e, recTTFT, recE2E} {
		slices.Sort(x)
	}
	same := func(a, b []float64) bool {
		return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Abs(x-y) < 1e-12 })
	}
	ok := sum.Completed == 3 && same(ttft, recTTFT) && same(e2e, recE2E)
	r.Check("example: the recorder's TTFT and E2E are the timeline's", ok, "3 requests; TTFT mean %.1f ms, E2E mean %.1f ms", 1e3*sum.TTFT.Mean, 1e3*sum.E2E.Mean)
	r.Check("example: one preemption, recomputed", res.Sched.Preemptions == 1 && res.Sched.Recomputed == 5,
		"preemptions %d, tokens recomputed %d (want 1 and C's prompt of 5)", res.Sched.Preemptions, res.Sched.Recomputed)
	return nil
}

// ---- fixed against continuous -----------------------------------------

// sweepPoint is one (budget, rate) cell of the sweep.
type sweepPoint struct {
	rate       float64
	fixed      *outcome // the best batch size's
	continuous *outcome
}

// servingSweep is the sweep's results, by budget.
type servingSweep struct {
	budgets []int
	points  [][]sweepPoint
	ref     int // index of the reference budget
}

func (sw *servingSweep) refPoints() []sweepPoint { return sw.points[sw.ref] }

// peak is the index of the rate where one scheduler's goodput peaks.
func peak(points []sweepPoint, of func(sweepPoint) *outcome) int {
	best := 0
	for i, p := range points {
		if of(p).sum.Goodput > of(points[best]).sum.Goodput {
			best = i
		}
	}
	return best
}

func fixedOf(p sweepPoint) *outcome      { return p.fixed }
func continuousOf(p sweepPoint) *outcome { return p.continuous }

// bestFixed runs static batching at every batch size and keeps the run
// with the best goodput.
func (sl *servingLab) bestFixed(ctx context.Context, reqs []serving.Request, budget int) (*outcome, error) {
	var best *outcome
	for _, b := range sl.cfg.Batches {
		o, err := sl.simulate(ctx, reqs, policy{fixed: b, blocks: budget, caching: true}, false)
		if err != nil {
			return nil, err
		}
		if best == nil || o.sum.Goodput > best.sum.Goodput {
			best = o
		}
	}
	return best, nil
}

func (sl *servingLab) sweep(ctx context.Context, r *reports.Report) (*servingSweep, error) {
	cfg := sl.cfg
	sw := &servingSweep{budgets: cfg.Budgets, ref: len(cfg.Budgets) / 2}
	t := r.AddTable(fmt.Sprintf("Fixed (best batch size) against continuous batching, %d requests a run", cfg.Requests),
		reports.Int("KV blocks"), reports.Float("rate (req/s)", 2), reports.Int("fixed batch"),
		reports.Float("fixed goodput", 2), reports.Float("cont. goodput", 2), reports.Float("cont. / fixed", 1),
		reports.Float("fixed thru", 2), reports.Float("cont. thru", 2), reports.Float("cont. TTFT p90 (s)", 2),
		reports.Int("preempt"))
	for _, budget := range cfg.Budgets {
		var row []sweepPoint
		for _, rate := range cfg.Rates {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			reqs := sl.workload(cfg.Requests, rate, false)
			f, err := sl.bestFixed(ctx, reqs, budget)
			if err != nil {
				return nil, err
			}
			p := sweepPoint{rate: rate, fixed: f}
			o, err := sl.simulate(ctx, reqs, policy{blocks: budget, caching: true}, false)
			if err != nil {
				return nil, err
			}
			p.continuous = o
			row = append(row, p)
			t.Row(budget, rate, p.fixed.p.fixed, p.fixed.sum.Goodput, o.sum.Goodput, o.sum.Goodput/p.fixed.sum.Goodput,
				p.fixed.sum.RequestThroughput, o.sum.RequestThroughput, o.sum.TTFT.P90, o.res.Sched.Preemptions)
		}
		sw.points = append(sw.points, row)
	}
	t.Note("Goodput and throughput are requests per second (thru: completed requests). Fixed batching takes up to the batch size of queued requests whose whole KV (prompt + max_tokens) fits, and runs them until the last finishes; each rate shows its best batch size of %v. Continuous: FCFS, up to %d sequences and %d tokens per iteration, decodes first, preemption by recompute.", cfg.Batches, cfg.MaxSeqs, cfg.MaxTokens)
	worst := math.Inf(1)
	var details []string
	for bi, budget := range sw.budgets {
		pts := sw.points[bi]
		k := peak(pts, fixedOf)
		ratio := pts[k].continuous.sum.Goodput / pts[k].fixed.sum.Goodput
		if math.IsNaN(ratio) {
			ratio = 0
		}
		worst = min(worst, ratio)
		details = append(details, fmt.Sprintf("%d blocks: fixed peaks at %g req/s with %.3f, continuous %.3f there (%.2fx)",
			budget, pts[k].rate, pts[k].fixed.sum.Goodput, pts[k].continuous.sum.Goodput, ratio))
	}
	ref := sw.refPoints()
	kf, kc := peak(ref, fixedOf), peak(ref, continuousOf)
	r.Metric("goodput_ratio_continuous_vs_fixed", worst)
	r.Metric("fixed_peak_rate_per_s", ref[kf].rate)
	r.Metric("fixed_peak_goodput_per_s", ref[kf].fixed.sum.Goodput)
	r.Metric("continuous_peak_goodput_per_s", ref[kc].continuous.sum.Goodput)
	r.Metric("goodput_peak_ratio_continuous_vs_fixed", ref[kc].continuous.sum.Goodput/ref[kf].fixed.sum.Goodput)
	r.Check("target: continuous ≥ 2x fixed goodput at fixed's peak rate", worst >= 2,
		"smallest ratio over the budgets %.2f; %s", worst, strings.Join(details, "; "))
	if kf == len(ref)-1 || (kf == 0 && len(ref) > 1) {
		r.Note("Fixed batching's goodput peaks at the edge of the rates swept (%g req/s): its true peak may lie outside them.", ref[kf].rate)
	}
	fixedPreempt := int64(0)
	for _, row := range sw.points {
		for _, p := range row {
			fixedPreempt += p.fixed.res.Sched.Preemptions
		}
	}
	r.Check("fixed batching never preempts (its reservations cover every token)", fixedPreempt == 0, "%d preemptions", fixedPreempt)
	sl.latencyTable(r, ref[kf], sw.budgets[sw.ref])
	if err := addServingFigures(r, ref, ref[kf], ref[kc], sw.budgets[sw.ref]); err != nil {
		return nil, err
	}
	return sw, nil
}

// latencyTable is vLLM's summary of both schedulers at one point.
func (sl *servingLab) latencyTable(r *reports.Report, p sweepPoint, budget int) {
	ms := func(name string) reports.Column { return reports.Float(name, 1) }
	t := r.AddTable(fmt.Sprintf("Latency at fixed's peak rate (%g req/s, %d blocks), in ms", p.rate, budget),
		reports.Text("metric"), ms("fixed mean"), ms("fixed p50"), ms("fixed p90"), ms("fixed p99"),
		ms("cont. mean"), ms("cont. p50"), ms("cont. p90"), ms("cont. p99"))
	for _, m := range []struct {
		name string
		f, c serving.Dist
	}{
		{"TTFT", p.fixed.sum.TTFT, p.continuous.sum.TTFT}, {"TPOT", p.fixed.sum.TPOT, p.continuous.sum.TPOT},
		{"ITL", p.fixed.sum.ITL, p.continuous.sum.ITL}, {"E2E", p.fixed.sum.E2E, p.continuous.sum.E2E},
	} {
		t.Row(m.name, 1e3*m.f.Mean, 1e3*m.f.Median, 1e3*m.f.P90, 1e3*m.f.P99, 1e3*m.c.Mean, 1e3*m.c.Median, 1e3*m.c.P90, 1e3*m.c.P99)
	}
	f, c := p.fixed.sum, p.continuous.sum
	t.Note("Fixed (batch %d): %d completed, %.2f req/s, %.0f output tok/s, goodput %.3f req/s. Continuous: %d completed, %.2f req/s, %.0f output tok/s, goodput %.3f req/s. KV in use on average: fixed %.0f%%, continuous %.0f%% (peak %.0f%%).",
		p.fixed.p.fixed, f.Completed, f.RequestThroughput, f.OutputThroughput, f.Goodput, c.Completed, c.RequestThroughput, c.OutputThroughput, c.Goodput,
		100*p.fixed.res.KVUsed, 100*p.continuous.res.KVUsed, 100*p.continuous.res.KVPeak)
	t.Note("Static batching loses on TTFT: a request that arrives while a batch runs waits for the batch's longest member, and the batch's own members wait for its prefill. Its TPOT is no worse than continuous batching's.")
}

// ---- KV waste, prefix caching, preemption --------------------------------

func (sl *servingLab) waste(ctx context.Context, r *reports.Report, sw *servingSweep) error {
	ref := sw.refPoints()
	rate := ref[peak(ref, continuousOf)].rate
	budget := sw.budgets[sw.ref]
	reqs := sl.workload(sl.cfg.Requests, rate, false)
	t := r.AddTable(fmt.Sprintf("KV waste: paged blocks against the contiguous reservation (continuous, %g req/s, %d×%d token slots)", rate, budget, sl.cfg.BlockSize),
		reports.Text("layout"), reports.Int("slots per block"), reports.Int("most running"), reports.Percent("KV in use", 1),
		reports.Percent("waste", 2), reports.Float("goodput", 2), reports.Float("thru", 2), reports.Int("preempt"))
	layouts := []struct {
		name string
		p    policy
	}{
		{"paged", policy{blocks: budget, blockSize: max(1, sl.cfg.BlockSize/2)}},
		{"paged", policy{blocks: budget}},
		{"paged", policy{blocks: budget, blockSize: 2 * sl.cfg.BlockSize}},
		{"contiguous", policy{blocks: budget, contiguous: true}},
	}
	var paged, contiguous *outcome
	for _, l := range layouts {
		o, err := sl.simulate(ctx, reqs, l.p, false)
		if err != nil {
			return err
		}
		size := l.p.blockSize
		switch {
		case l.p.contiguous:
			size, contiguous = sl.cfg.MaxLen, o
		case size == 0:
			size, paged = sl.cfg.BlockSize, o
		}
		t.Row(l.name, size, o.res.Sched.MaxRunning, o.res.KVUsed, o.res.Waste, o.sum.Goodput, o.sum.RequestThroughput, o.res.Sched.Preemptions)
	}
	t.Note("Waste is the share of the token slots in use that hold no token (the unfilled end of each request's last block, or of its max-length reservation), weighted by iteration time. Prefix caching is off here, so no block is shared.")
	r.Metric("kv_waste_paged_ratio", paged.res.Waste)
	r.Metric("kv_waste_contiguous_ratio", contiguous.res.Waste)
	r.Check("target: paged KV waste under 4%", paged.res.Waste < 0.04, "%.2f%% with blocks of %d", 100*paged.res.Waste, sl.cfg.BlockSize)
	r.Check("the contiguous reservation wastes more than paging", contiguous.res.Waste > paged.res.Waste,
		"contiguous %.1f%% against paged %.2f%%; contiguous ran at most %d requests at once, paged %d",
		100*contiguous.res.Waste, 100*paged.res.Waste, contiguous.res.Sched.MaxRunning, paged.res.Sched.MaxRunning)
	return nil
}

func (sl *servingLab) prefix(ctx context.Context, r *reports.Report, sw *servingSweep) error {
	ref := sw.refPoints()
	rate := ref[max(peak(ref, continuousOf)-1, 0)].rate // a load continuous batching takes without preempting
	budget := sw.budgets[len(sw.budgets)-1]
	reqs := sl.workload(sl.cfg.Requests, rate, true)
	t := r.AddTable(fmt.Sprintf("Prefix caching: %d groups share a %d-token prefix (continuous, %g req/s, %d blocks)", sl.cfg.Groups, sl.cfg.PrefixLen, rate, budget),
		reports.Text("prefix cache"), reports.Percent("hit", 1), reports.Int("tokens computed"), reports.Int("copies on write"),
		reports.Int("evictions"), reports.Float("TTFT mean (ms)", 1), reports.Float("thru", 2), reports.Int("preempt"))
	var runs [2]*outcome
	for i, on := range []bool{false, true} {
		o, err := sl.simulate(ctx, reqs, policy{blocks: budget, caching: on}, false)
		if err != nil {
			return err
		}
		runs[i] = o
		st := o.res.Blocks
		hit := math.NaN()
		if on {
			hit = float64(st.HitTokens) / float64(st.LookupTokens)
		}
		t.Row(map[bool]string{false: "off", true: "on"}[on], hit, o.res.Sched.Processed, st.CopyOnWrite, st.Evictions, 1e3*o.sum.TTFT.Mean, o.sum.RequestThroughput, o.res.Sched.Preemptions)
	}
	off, on := runs[0].res, runs[1].res
	hit := float64(on.Blocks.HitTokens) / float64(on.Blocks.LookupTokens)
	r.Metric("prefix_cache_hit_ratio", hit)
	// The most any cache could find: every request but its group's first
	// reusing the whole prefix.
	first := map[int]bool{}
	var bound int64
	for _, q := range reqs {
		if first[q.Group] {
			bound += int64(min(q.PrefixLen, q.Prompt-1))
		}
		first[q.Group] = true
	}
	t.Note("No request is cancelled in this workload. Hit is the share of the tokens looked up at admission whose KV was found cached, vLLM's prefix-cache hit rate; a prefix of %d tokens ends inside a block of %d, so a new request maps its group's full blocks and shares the divergent block up to its first own token, copying it there (copy on write).", sl.cfg.PrefixLen, sl.cfg.BlockSize)
	if on.Sched.Preemptions == 0 {
		r.Check("prefix caching finds the shared prefixes, and no more than exist", hit > 0 && on.Blocks.HitTokens <= bound,
			"%.1f%% of looked-up tokens hit: %d tokens, of at most %d shared-prefix tokens beyond each group's first request", 100*hit, on.Blocks.HitTokens, bound)
	} else {
		r.Check("prefix caching finds the shared prefixes", hit > 0, "%.1f%% of looked-up tokens hit (%d tokens)", 100*hit, on.Blocks.HitTokens)
	}
	if off.Sched.Preemptions == 0 && on.Sched.Preemptions == 0 {
		r.Check("cached tokens are not computed again", off.Sched.Processed-on.Sched.Processed == on.Blocks.HitTokens,
			"tokens computed: %d without the cache, %d with it, %d hit", off.Sched.Processed, on.Sched.Processed, on.Blocks.HitTokens)
	} else {
		r.Note("Preemptions occurred in the prefix-caching runs, so their computed tokens differ by recomputation as well as by hits.")
	}
	return nil
}

// preemption compares the preemption modes on the smallest budget at the
// lowest rate where the sweep saw continuous batching preempt, or on half
// that budget at the highest rate when it never did.
func (sl *servingLab) preemption(ctx context.Context, r *reports.Report, sw *servingSweep) error {
	small := slices.Index(sw.budgets, slices.Min(sw.budgets))
	budget, rate := max(sw.budgets[small]/2, 2), slices.Max(sl.cfg.Rates)
	for _, p := range sw.points[small] {
		if p.continuous.res.Sched.Preemptions > 0 {
			budget, rate = sw.budgets[small], p.rate
			break
		}
	}
	reqs := sl.workload(sl.cfg.Requests, rate, false)
	chunk := max(sl.cfg.MaxTokens/4, 1)
	t := r.AddTable(fmt.Sprintf("Preemption under overload (continuous, %g req/s, %d blocks)", rate, budget),
		reports.Text("mode"), reports.Int("preempt"), reports.Int("swapped blocks"), reports.Percent("recomputed", 1),
		reports.Float("goodput", 2), reports.Float("TTFT p90 (s)", 2), reports.Float("TPOT p99 (ms)", 1))
	var recompute, swap *outcome
	for _, m := range []struct {
		name string
		p    policy
	}{
		{"recompute", policy{blocks: budget, caching: true}},
		{"swap", policy{blocks: budget, caching: true, swap: true}},
		{fmt.Sprintf("chunked %d", chunk), policy{blocks: budget, caching: true, chunked: true, chunkTokens: chunk}},
	} {
		o, err := sl.simulate(ctx, reqs, m.p, false)
		if err != nil {
			return err
		}
		st := o.res.Sched
		t.Row(m.name, st.Preemptions, o.res.Blocks.SwapOut+o.res.Blocks.SwapIn, float64(st.Recomputed)/float64(max(st.Processed, 1)),
			o.sum.Goodput, o.sum.TTFT.P90, 1e3*o.sum.TPOT.P99)
		switch {
		case m.p.swap:
			swap = o
		case !m.p.chunked:
			recompute = o
		}
	}
	t.Note("Recompute drops a victim's KV and prefills it again (prompt and tokens so far, less what the prefix cache still holds); swap copies its blocks to a host budget as large as the device's and back (0.32 ms a block); chunked prefill splits prompts to at most %d tokens an iteration beside the decodes. Recomputed is the share of all tokens processed.", chunk)
	if recompute.res.Sched.Preemptions > 0 {
		r.Check("swap keeps a victim's KV: nothing recomputed", swap.res.Sched.Recomputed == 0 && swap.res.Sched.Swaps == swap.res.Sched.Preemptions,
			"swap: %d preemptions, all swaps, %d tokens recomputed; recompute: %d preemptions, %d tokens recomputed",
			swap.res.Sched.Preemptions, swap.res.Sched.Recomputed, recompute.res.Sched.Preemptions, recompute.res.Sched.Recomputed)
	} else {
		r.Note("No preemption occurred at %g req/s on %d blocks: raise the rate or lower the budget to see one.", rate, budget)
	}
	return nil
}

// ---- a user's trace -------------------------------------------------------

func (sl *servingLab) trace(ctx context.Context, r *reports.Report) error {
	if sl.cfg.Trace == "" {
		return nil
	}
	f, err := os.Open(sl.cfg.Trace)
	if err != nil {
		return lab.Usagef("--set trace=%s: %v", sl.cfg.Trace, err)
	}
	defer f.Close()
	defer sl.status.Clear()
	sl.status.Say("serving: reading the trace %s", sl.cfg.Trace)
	reqs, err := serving.ReadTrace(f)
	if err != nil {
		return lab.Usagef("--set trace=%s: %v", sl.cfg.Trace, err)
	}
	t := r.AddTable(fmt.Sprintf("The trace %s: %d requests", sl.cfg.Trace, len(reqs)),
		reports.Int("KV blocks"), reports.Text("scheduler"), reports.Int("done"), reports.Int("rejected"),
		reports.Float("goodput", 3), reports.Float("thru", 3), reports.Float("TTFT p90 (s)", 3), reports.Float("TPOT p90 (ms)", 1),
		reports.Percent("waste", 2))
	for _, budget := range sl.cfg.Budgets {
		sl.status.Say("serving: the trace's %s on %d KV blocks", reports.Count(len(reqs), "request"), budget)
		best, err := sl.bestFixed(ctx, reqs, budget)
		if err != nil {
			return err
		}
		cont, err := sl.simulate(ctx, reqs, policy{blocks: budget, caching: true}, false)
		if err != nil {
			return err
		}
		for _, o := range []*outcome{best, cont} {
			name := "continuous"
			if o.p.fixed > 0 {
				name = fmt.Sprintf("fixed %d", o.p.fixed)
			}
			s := o.sum
			t.Row(budget, name, s.Completed, s.Rejected, s.Goodput, s.RequestThroughput, s.TTFT.P90, 1e3*s.TPOT.P90, o.res.Waste)
		}
	}
	t.Note("A trace's requests carry no shared prefixes (the format has token counts, not tokens). A request whose KV cannot fit a budget is rejected.")
	return nil
}

// ---- the simulator's speed ----------------------------------------------------

// A simulator-speed size runs again until speedRepeatFor seconds are
// spent, speedRepeatMax times at most.
const (
	speedRepeatFor = 0.5
	speedRepeatMax = 5
)

func (sl *servingLab) speed(ctx context.Context, r *reports.Report) error {
	n := sl.cfg.SimRequests
	sizes := []int{}
	for _, k := range []int{n / 100, n / 10, n} {
		if k >= 1000 {
			sizes = append(sizes, k)
		}
	}
	budget := slices.Max(sl.cfg.Budgets)
	t := r.AddTable(fmt.Sprintf("Simulator speed (continuous, %d blocks, 10 req/s)", budget),
		reports.Int("requests"), reports.Int("iterations"), reports.Int("tokens"), reports.Int("runs"),
		reports.Float("wall (s)", 3), reports.Float("requests/s", 0), reports.Float("ns/token", 1))
	var rates []float64
	for _, k := range sizes {
		reqs := sl.workload(k, 10, false)
		// The fastest run counts: a short run alone measures the machine's
		// noise as much as the simulator. The heap is collected before each,
		// so no run pays for the garbage of the one before.
		var res *serving.Result
		wall, runs := math.Inf(1), 0
		for spent := 0.0; runs == 0 || (spent < speedRepeatFor && runs < speedRepeatMax); runs++ {
			s, err := sl.scheduler(policy{blocks: budget, caching: true})
			if err != nil {
				return err
			}
			runtime.GC()
			t0 := time.Now()
			res, err = serving.Simulate(ctx, reqs, s, serving.SimConfig{Cost: serving.DefaultCost})
			took := time.Since(t0).Seconds()
			if err != nil {
				return err
			}
			wall, spent = min(wall, took), spent+took
			sl.runs++
			sl.checks += res.Checks
			if sum := res.Rec.Summary(sl.slo); sum.Completed+sum.Cancelled+sum.Rejected != k {
				sl.unaccounted = append(sl.unaccounted, fmt.Sprintf("speed run: %d requests", k))
			}
		}
		rates = append(rates, float64(k)/wall)
		t.Row(k, res.Sched.Iterations, res.Sched.Processed, runs, wall, float64(k)/wall, 1e9*wall/float64(res.Sched.Processed))
	}
	t.Note("wall: the fastest of the runs (each from a collected heap); a size is run again until %.1f s are spent, %d times at most.",
		speedRepeatFor, speedRepeatMax)
	last := rates[len(rates)-1]
	r.Metric("sim_requests_per_s", last)
	// The targets are decided over rounds (lab.RatioTarget), each a run of
	// the sizes the check compares.
	// The rounds run speedRoundMax requests (or the largest size, if
	// smaller) and a tenth of that: a round of a million would take a
	// minute. Their runs of the larger are the first rounds of the million
	// check, which scales their time to a million.
	big := min(sizes[len(sizes)-1], speedRoundMax)
	small := big / 10
	var perMillion []float64
	if small >= 100 {
		linear := lab.RatioTarget{Target: 3, Budget: speedTimedBudget}
		tm, err := linear.Sample(ctx, nil, func() (float64, error) {
			a, err := sl.simulateOnce(ctx, small, budget)
			if err != nil {
				return 0, err
			}
			b, err := sl.simulateOnce(ctx, big, budget)
			perMillion = append(perMillion, 1e6*b/float64(big))
			return (b / float64(big)) / (a / float64(small)), err
		})
		if err != nil {
			return err
		}
		r.TimedCheck("the simulator's cost grows linearly in requests", tm,
			"%s per request at %d over at %d, in the same round (within 3x: timings on a shared machine are noisy)", speedClock(), big, small)
	}
	million := lab.RatioTarget{Target: 60, Budget: speedTimedBudget, Unit: " s"}
	tm, err := million.Sample(ctx, perMillion, func() (float64, error) {
		took, err := sl.simulateOnce(ctx, big, budget)
		return 1e6 * took / float64(big), err
	})
	if err != nil {
		return err
	}
	r.TimedCheck("target: a million requests simulated in under a minute", tm,
		"%s seconds per million requests, a round a run of %d", speedClock(), big)
	return nil
}

// speedClock names what simulateOnce measures.
func speedClock() string {
	if _, ok := cputime.Process(); ok {
		return "CPU"
	}
	return "wall"
}

// speedTimedBudget is the wall time a speed target may take in rounds
// past its first ten; speedRoundMax is the most requests a round runs.
const (
	speedTimedBudget = 10 * time.Second
	speedRoundMax    = 20_000
)

// simulateOnce runs k requests at 10 req/s on budget blocks, from a
// collected heap, and returns the seconds it took: the CPU time the
// process used (every thread: the simulator and its garbage collection)
// where the platform gives it, else the wall time. A speed target is on
// how fast the simulator runs, and CPU time leaves out the time a busy
// machine made it wait for a core; on an idle machine the two agree (the
// simulator runs on one goroutine).
func (sl *servingLab) simulateOnce(ctx context.Context, k, budget int) (float64, error) {
	reqs := sl.workload(k, 10, false)
	s, err := sl.scheduler(policy{blocks: budget, caching: true})
	if err != nil {
		return 0, err
	}
	runtime.GC()
	t0 := time.Now()
	c0, onCPU := cputime.Process()
	res, err := serving.Simulate(ctx, reqs, s, serving.SimConfig{Cost: serving.DefaultCost})
	took := time.Since(t0).Seconds()
	if c1, _ := cputime.Process(); onCPU {
		took = (c1 - c0).Seconds()
	}
	if err != nil {
		return 0, err
	}
	sl.runs++
	sl.checks += res.Checks
	if sum := res.Rec.Summary(sl.slo); sum.Completed+sum.Cancelled+sum.Rejected != k {
		sl.unaccounted = append(sl.unaccounted, fmt.Sprintf("speed run: %d requests", k))
	}
	return took, nil
}

// ---- figures ------------------------------------------------------------------

var (
	fixedColor      = color.RGBA{R: 220, G: 90, B: 30, A: 255}
	continuousColor = color.RGBA{R: 70, G: 130, B: 180, A: 255}
)

func addServingFigures(r *reports.Report, ref []sweepPoint, peak, contPeak sweepPoint, budget int) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Throughput and goodput against arrival rate (%d blocks)", budget)
	p.X.Label.Text = "arrival rate (requests/s)"
	p.Y.Label.Text = "requests/s"
	series := []struct {
		name  string
		c     color.Color
		dash  bool
		value func(sweepPoint) float64
	}{
		{"continuous throughput", continuousColor, true, func(s sweepPoint) float64 { return s.continuous.sum.RequestThroughput }},
		{"continuous goodput", continuousColor, false, func(s sweepPoint) float64 { return s.continuous.sum.Goodput }},
		{"fixed throughput", fixedColor, true, func(s sweepPoint) float64 { return s.fixed.sum.RequestThroughput }},
		{"fixed goodput", fixedColor, false, func(s sweepPoint) float64 { return s.fixed.sum.Goodput }},
	}
	for _, s := range series {
		xy := make(plotter.XYs, len(ref))
		for i, pt := range ref {
			xy[i] = plotter.XY{X: pt.rate, Y: s.value(pt)}
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color = s.c, s.c
		if s.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	p.Legend.Top, p.Legend.Left = true, true
	r.AddFigure("serving-goodput", p, 16*vg.Centimeter, 10*vg.Centimeter)

	c := plot.New()
	c.Title.Text = fmt.Sprintf("Latency CDF at %g req/s (fixed's peak goodput)", peak.rate)
	c.X.Label.Text = "seconds (log scale)"
	c.Y.Label.Text = "fraction of completed requests"
	c.X.Scale, c.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	for _, s := range []struct {
		name string
		col  color.Color
		dash bool
		x    []float64
	}{
		{"continuous TTFT", continuousColor, true, peak.continuous.res.Rec.TTFT()},
		{"continuous E2E", continuousColor, false, peak.continuous.res.Rec.E2E()},
		{"fixed TTFT", fixedColor, true, peak.fixed.res.Rec.TTFT()},
		{"fixed E2E", fixedColor, false, peak.fixed.res.Rec.E2E()},
	} {
		if len(s.x) == 0 {
			continue
		}
		slices.Sort(s.x)
		xy := make(plotter.XYs, len(s.x))
		for i, v := range s.x {
			xy[i] = plotter.XY{X: max(v, 1e-4), Y: float64(i+1) / float64(len(s.x))}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = s.col
		if s.dash {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		c.Add(l)
		c.Legend.Add(s.name, l)
	}
	c.Legend.Top, c.Legend.Left, c.Legend.XOffs = true, true, 3*vg.Centimeter
	r.AddFigure("serving-latency-cdf", c, 16*vg.Centimeter, 10*vg.Centimeter)

	u := plot.New()
	u.Title.Text = fmt.Sprintf("KV blocks in use, continuous at %g req/s (%d blocks)", contPeak.rate, budget)
	u.X.Label.Text = "time (s)"
	u.Y.Label.Text = "fraction of the budget"
	u.Y.Min, u.Y.Max = 0, 1
	pts := contPeak.continuous.res.Util
	xy := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xy[i] = plotter.XY{X: pt.T, Y: pt.Used}
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = continuousColor
	u.Add(l)
	r.AddFigure("serving-kv-use", u, 16*vg.Centimeter, 8*vg.Centimeter)
	r.Note("Figures: serving-goodput (throughput and goodput against rate, the reference budget), serving-latency-cdf (TTFT and E2E of completed requests at fixed batching's peak rate), serving-kv-use (device blocks in use over time for continuous batching at its peak rate).")
	return nil
}
