package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gptlab/experiments/lab"
	"gptlab/internal/cputime"
	"gptlab/internal/par"
	"gptlab/internal/sgemm"
	"gptlab/models"
	"gptlab/planner/recompute"
	"gptlab/reports"
)

// toMoves is the chain schedule of a step schedule (the inverse of
// models.FromMoves): segment i+1 is link i; the embedding's passes drop.
func toMoves(s models.StepSchedule) recompute.Moves {
	var ms recompute.Moves
	for _, p := range s.Passes {
		if p.Seg == 0 {
			continue
		}
		ms = append(ms, recompute.Move{Link: p.Seg - 1, Backward: p.Backward, Part: p.Selective})
	}
	return ms
}

// sweepBudgets runs the budget sweep: for budgets from the chain model's
// smallest feasible budget up to none's peak, the dynamic program's
// schedule (the cheapest in the chain's FLOP/byte cost, so the same on
// every run) planned, run and timed (interleaved with none), beside the
// cheapest fixed policy whose planned peak fits the same budget.
func (res *ckShapeResult) sweepBudgets(ctx context.Context, ch *lab.Chain, p *models.Params, idx, tgt []int32, seed int64, cfg *checkpointConfig) error {
	mc := res.cfg
	plan := func(s models.StepSchedule) (int64, error) {
		m, err := models.NewModel(mc, p, mc.Batch, mc.Block, true, models.WithStepSchedule(s))
		if err != nil {
			return 0, err
		}
		defer m.Close()
		return m.Arena().Stats().ArenaBytes, nil
	}
	res.smallest = ch.SmallestFeasible()
	none := res.rows[0]
	for i := range cfg.Budgets {
		if err := ctx.Err(); err != nil {
			return err
		}
		budget := res.smallest + (none.peak-res.smallest)*int64(i)/int64(cfg.Budgets-1)
		br, err := ch.BestWithin(budget, plan)
		if errors.Is(err, lab.ErrBudget) && i == 0 { // the model's minimum may plan a little higher
			budget += max(1, none.peak/100)
			br, err = ch.BestWithin(budget, plan)
		}
		if err != nil {
			return fmt.Errorf("budget %s: %w", reports.FormatBytes(float64(budget)), err)
		}
		rows, err := runSchedules(ctx, mc, p, idx, tgt, seed, []string{"none", "dp"}, []models.StepSchedule{res.scheduled["none"], br.Schedule}, cfg.Steps, nil)
		if err != nil {
			return err
		}
		dp := rows[1]
		dp.name, dp.budget, dp.model = fmt.Sprintf("budget:%s", reports.FormatBytes(float64(budget))), budget, br.Time
		dp.moves = br.Moves
		dp.measured, _ = ch.MeasuredTime(br.Moves)
		dp.ms = dp.slow * none.ms // on none's scale: the ratio measured side by side
		dp.fixed, dp.fixedTime = "-", math.Inf(1)
		for _, f := range res.rows {
			if f.peak > budget {
				continue
			}
			t, _, err := recompute.Simulate(ch.Links, ch.In, toMoves(res.scheduled[f.name]))
			if err != nil {
				return err
			}
			if t < dp.fixedTime {
				dp.fixed, dp.fixedTime, dp.fixedMs, dp.fixedPeak = f.name, t, f.ms, f.peak
			}
		}
		res.sweep = append(res.sweep, dp)
	}
	return nil
}

// report adds one shape's tables, checks and metrics.
func (res *ckShapeResult) report(r *reports.Report, name string) {
	mc := res.cfg
	t := r.AddTable(fmt.Sprintf("Policies on %s: %d layers, block %d, batch %d (dropout %.2g)", name, mc.Layers, mc.Block, mc.Batch, mc.Dropout),
		reports.Text("policy"), reports.Bytes("kept"), reports.Bytes("peak"), reports.Ratio("peak ÷ none"),
		reports.Percent("recompute", 1), reports.Float("step ms", 1), reports.Percent("spread", 0),
		reports.Ratio("ms ÷ none"), reports.Text("bitwise"), reports.Text("rng"))
	none := res.rows[0]
	for _, row := range res.rows {
		t.Row(row.name, row.kept, row.peak, lab.Ratio(row.peak, none.peak), row.recompute, row.ms, row.spread,
			row.slow, yesNo(row.bitwise), yesNo(row.rng))
	}
	for _, row := range res.mixed {
		t.Row(res.precision+" "+row.name, row.kept, row.peak, lab.Ratio(row.peak, none.peak), row.recompute, row.ms, row.spread,
			row.slow, yesNo(row.bitwise), yesNo(row.rng))
	}
	t.Note("kept: what the arena holds as the backward begins; recompute: forward FLOPs run again, of one forward; " +
		"bitwise: gradients equal none's with counter masks and with the stateful generator (restored); " +
		"rng: the generator's stream after the step equals none's.")
	if len(res.mixed) > 0 {
		t.Note("The %s rows run each policy under the %s precision policy (16-bit activations and gradients, float32 "+
			"master weights): peak ÷ none is against float32's none, ms ÷ none and bitwise against %s none's, with "+
			"which they ran interleaved.", res.precision, res.precision, res.precision)
	}
	s := r.AddTable(fmt.Sprintf("Budget sweep on %s: the dynamic program against the fixed policies", name),
		reports.Bytes("budget"), reports.Bytes("dp peak"), reports.Float("cost ms", 2), reports.Float("dp ms", 1),
		reports.Text("fixed within"), reports.Bytes("its peak"), reports.Float("its ms", 1), reports.Ratio("cost ÷ fixed"))
	s.Constant(reports.Bytes("smallest planned peak found"), res.smallestPlanned())
	for _, row := range res.sweep {
		var fixedRatio, fixedPeak, fixedMs any // none when no fixed policy fits
		if !math.IsInf(row.fixedTime, 1) {
			fixedRatio, fixedPeak, fixedMs = row.model/row.fixedTime, row.fixedPeak, row.fixedMs
		}
		s.Row(row.budget, row.peak, row.model*1e3, row.ms, row.fixed, fixedPeak, fixedMs, fixedRatio)
		measured := ""
		if row.measured > 0 {
			measured = fmt.Sprintf("; the measured chain runs it in %.2f ms", row.measured*1e3)
		}
		r.Check(fmt.Sprintf("%s %s: the schedule's planned peak fits and its step equals none's", name, row.name),
			row.peak <= row.budget && row.bitwise, "planned %s within %s, gradients bitwise %v; cost %.3f ms%s; schedule %v",
			reports.FormatBytes(float64(row.peak)), reports.FormatBytes(float64(row.budget)), row.bitwise,
			row.model*1e3, measured, row.moves)
		if !math.IsInf(row.fixedTime, 1) {
			r.Check(fmt.Sprintf("%s %s: the dynamic program costs no more than %s", name, row.name, row.fixed),
				row.model <= row.fixedTime*(1+1e-9),
				"cost %.3f ms against %.3f ms (measured %.1f against %.1f ms)", row.model*1e3, row.fixedTime*1e3, row.ms, row.fixedMs)
		}
	}
	s.Note("Budgets run from the chain model's smallest feasible budget to none's peak; a schedule may plan below "+
		"its budget. cost ms: the schedule's cost, each op the longer of its FLOPs at %.0f GFLOP/s and its bytes at "+
		"%.0f GB/s (fixed constants: a budget gets the same schedule on every run), by which the dynamic program "+
		"chooses and is compared (cost ÷ fixed). dp ms, its ms: measured steps (dp ms interleaved with none, on "+
		"none's scale); the profiled chain (profile-runs) is reported only, in the checks.",
		models.DefaultCost.FlopsPerSecond/1e9, models.DefaultCost.BytesPerSecond/1e9)
	bit := true
	for _, row := range res.rows {
		bit = bit && row.bitwise && row.rng
	}
	r.Check(name+": every policy's gradients and generator stream equal none's", bit, "%d policies, dropout %.2g", len(res.rows)-1, mc.Dropout)
	if len(res.mixed) > 0 {
		bit := true
		for _, row := range res.mixed {
			bit = bit && row.bitwise && row.rng
		}
		r.Check(fmt.Sprintf("%s under %s: every policy's gradients and generator stream equal %s none's", name, res.precision, res.precision), bit,
			"%d policies, dropout %.2g", len(res.mixed)-1, mc.Dropout)
		for _, row := range res.mixed {
			key := res.precision + "_" + metricKey(row.name)
			r.Metric(name+"_peak_bytes_"+key, row.peak)
			if row.name != "none" {
				r.Metric(name+"_step_time_ratio_"+key, row.slow)
			}
		}
	}
	for _, row := range res.rows {
		key := metricKey(row.name)
		r.Metric(name+"_peak_bytes_"+key, row.peak)
		if row.name != "none" {
			r.Metric(name+"_step_time_ratio_"+key, row.slow)
			r.Metric(name+"_recompute_flops_share_"+key, row.recompute)
		}
	}
}

// smallestPlanned is the lowest planned peak of the sweep's schedules:
// a peak some schedule reaches, where the chain model's smallest feasible
// budget (the first budget) is only an upper bound on it.
func (res *ckShapeResult) smallestPlanned() int64 {
	low := int64(math.MaxInt64)
	for _, row := range res.sweep {
		low = min(low, row.peak)
	}
	return low
}

// metricKey is a policy as a metric name part: "every:2" -> "every2".
func metricKey(s string) string {
	out := []rune{}
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	return string(out)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// row finds a policy's row.
func (res *ckShapeResult) row(name string) (ckRow, bool) {
	for _, r := range res.rows {
		if r.name == name {
			return r, true
		}
	}
	return ckRow{}, false
}

// ckTarget is a target of the issue on one shape: the peak cut at least
// cut, the step time at most slow times none's.
type ckTarget struct {
	shape, policy string
	cut, slow     float64
}

var ckTargets = []ckTarget{{"deep", "sqrt", 2.5, 1.4}, {"long", "selective", 1.5, 1.1}}

// ckTimedBudget is the wall time a target's step-time ratio may take in
// rounds past its first ten, to decide. A round of the long shape takes
// about 1.5 s (2 s beside a busy loop), so the budget reaches the
// sampler's fifth look (53 rounds) and nearly its sixth (80): where long's
// selective runs at 1.06-1.07x with a fifth of its rounds above 1.1x,
// as beside a busy loop, the fourth look (35 rounds, at most 8 above)
// often cannot decide and the fifth (at most 14) can. A quiet machine
// usually decides at its first looks, long before the budget.
const ckTimedBudget = 120 * time.Second

// timedTargets are the targets set for a shape.
func timedTargets(shape string) []ckTarget {
	var out []ckTarget
	for _, tg := range ckTargets {
		if tg.shape == shape {
			out = append(out, tg)
		}
	}
	return out
}

// sample decides the step-time ratio of policy's model over none's on
// rounds of its own (lab.RatioTarget: ten, then more until the interval
// leaves the target or the budget is spent). A round steps the
// two alternately ckRoundPairs times and takes the ratio of their fastest
// steps: a neighbour's load only ever adds time, so a step's minimum over
// a few tries is its cost with the least of that noise, where a single
// pair's ratio carries a burst that hit one side whole.
//
// The rounds run on one thread (sgemm's and the kernels' splits held to
// their caller): the ratio is of the two steps' work, and a step split
// across both cores waits at every split for its slower half, which a
// neighbour on either core makes slower: with a busy loop beside it, a
// round's ratio spread ±15% on two threads and ±4% on one (the same as
// on a quiet machine), for the same median.
//
// A step is timed on the process's CPU time where the platform gives it
// (ckClock), as the serving lab's speed target is: on one thread that is
// the step's own time on a core, which leaves out the time a neighbour
// took the core from it (a neighbour's share of the caches and of the
// core's other hardware thread stays in it: docs/exit-gate.md has the
// figures of both clocks beside a busy loop).
func (tg ckTarget) sample(ctx context.Context, none, policy *models.Model, idx, tgt []int32) (reports.Timing, error) {
	defer sgemm.SetThreads(sgemm.SetThreads(1))
	defer par.SetLimit(par.SetLimit(1))
	now := ckClock()
	rt := lab.RatioTarget{Target: tg.slow, Budget: ckTimedBudget}
	return rt.Sample(ctx, nil, func() (float64, error) {
		best := [2]time.Duration{math.MaxInt64, math.MaxInt64}
		for range ckRoundPairs {
			for i, m := range []*models.Model{none, policy} {
				t0 := now()
				if _, err := m.Step(idx, tgt); err != nil {
					return 0, err
				}
				best[i] = min(best[i], now()-t0)
			}
		}
		return float64(best[1]) / float64(best[0]), nil
	})
}

// ckClock is the clock the timed rounds read: the process's CPU time
// where the platform gives it, else the time since the call.
func ckClock() func() time.Duration {
	if _, ok := cputime.Process(); ok {
		return func() time.Duration { d, _ := cputime.Process(); return d }
	}
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}

// ckClockName names ckClock's clock for the reports.
func ckClockName() string {
	if _, ok := cputime.Process(); ok {
		return "CPU"
	}
	return "wall"
}

// ckRoundPairs is the number of step pairs in one sampled round.
const ckRoundPairs = 3

// targets checks the targets on the shapes they are set for (deep:
// sqrt cuts the peak 2.5x at most 1.4x the time; long: selective 1.5x at
// most 1.1x), sets the unprefixed metrics when name is the main shape (the
// deep one when it ran, else the last), and returns notes on missed
// targets.
func (res *ckShapeResult) targets(r *reports.Report, name, main string) []string {
	none := res.rows[0]
	var notes []string
	if name == main {
		r.Metric("peak_bytes_none", none.peak)
		for _, pol := range []string{"sqrt", "selective"} {
			if row, ok := res.row(pol); ok {
				r.Metric("peak_bytes_"+pol, row.peak)
				r.Metric("step_time_ratio_"+pol, row.slow)
				r.Metric("recompute_flops_share_"+pol, row.recompute)
			}
		}
	}
	for _, tg := range timedTargets(name) {
		row, ok := res.row(tg.policy)
		if !ok || row.timing == nil {
			continue
		}
		cut, slow := float64(none.peak)/float64(row.peak), row.timing.Median
		cutOK := r.Check(fmt.Sprintf("%s: %s cuts the peak at least %.1fx", name, tg.policy, tg.cut), cut >= tg.cut,
			"peak cut %.2fx (%s -> %s)", cut, reports.FormatBytes(float64(none.peak)), reports.FormatBytes(float64(row.peak)))
		slowOK := r.TimedCheck(fmt.Sprintf("%s: %s at most %.1fx the step time", name, tg.policy, tg.slow), *row.timing,
			"step time over none's in the same round, one thread each, on %s time (the sweep's steps spread %.0f%%)", ckClockName(), 100*row.spread) != reports.Fail
		if !cutOK || !slowOK {
			notes = append(notes, fmt.Sprintf("Target missed on %s: %s cut the peak %.2fx (target %.1fx) at %.2fx the step time (target %.1fx).",
				name, tg.policy, cut, tg.cut, slow, tg.slow))
		}
	}
	return notes
}

// checkpointChecks are the checks of the machinery itself: the dynamic
// program against every checkpoint subset and against an exhaustive
// search, the stateful generator without its restore (the negative
// control), and a stateful update replayed by a recomputation.
func checkpointChecks(r *reports.Report, cfg *checkpointConfig) error {
	rng := rand.New(rand.NewPCG(7, 8))
	subsets, worstSingle, worstNested := 0, 0.0, 0.0
	for trial := range 24 {
		n := 3 + trial%10 // chains of 3 to 12 links
		links := recompute.RandomChain(rng, n, trial%2 == 0 && n <= 9)
		_, peak, _ := recompute.Simulate(links, 8, recompute.Chen(n, nil, nil))
		for _, frac := range []float64{0.4, 0.6, 0.8} {
			budget := int64(frac * float64(peak))
			if links[1].PartSaved == 0 { // the subsets hold no partial saves
				best, fits := recompute.BestSubset(links, 8, budget)
				subsets += 1 << (n - 1)
				if dp, err := recompute.Optimal(links, 8, budget, 1, false); err == nil && fits {
					worstSingle = math.Max(worstSingle, math.Abs(dp.Time-best))
				} else if (err == nil) != fits {
					worstSingle = math.Inf(1)
				}
			}
			dp, err1 := recompute.Optimal(links, 8, budget, 1, true)
			ex, err2 := recompute.Exhaustive(links, 8, budget, true)
			switch {
			case (err1 == nil) != (err2 == nil):
				worstNested = math.Inf(1)
			case err1 == nil:
				worstNested = math.Max(worstNested, math.Abs(dp.Time-ex.Time))
			}
		}
	}
	r.Check("the dynamic program (single level) equals the best of every checkpoint subset", worstSingle < 1e-9,
		"chains of 3 to 12 links of unequal sizes and costs, 3 budgets each, %d subsets simulated; largest difference %g", subsets, worstSingle)
	r.Check("the dynamic program (nested) equals an exhaustive search of its schedules", worstNested < 1e-9,
		"the same chains, half with selective saves; largest difference %g", worstNested)
	return negativeControls(r, cfg)
}

// negativeControls: the stateful generator without its restore draws other
// masks in the recomputation (the gradients differ); a running mean in a
// recomputed segment is updated twice unless guarded.
func negativeControls(r *reports.Report, cfg *checkpointConfig) error {
	mc, _ := models.Preset("tiny")
	mc.Dropout = max(cfg.Dropout, 0.1)
	p := models.NewParams(mc, 3)
	rng := rand.New(rand.NewPCG(3, 4))
	idx, tgt := make([]int32, mc.Batch*mc.Block), make([]int32, mc.Batch*mc.Block)
	for i := range idx {
		idx[i], tgt[i] = int32(rng.IntN(mc.Vocab)), int32(rng.IntN(mc.Vocab))
	}
	ck, err := models.CheckpointStepSchedule(mc, []int{1})
	if err != nil {
		return err
	}
	step := func(s models.StepSchedule, opts ...models.ModelOption) (map[string][]float32, []byte, error) {
		m, err := models.NewModel(mc, p, mc.Batch, mc.Block, true, append(opts, models.WithStepSchedule(s))...)
		if err != nil {
			return nil, nil, err
		}
		defer m.Close()
		m.SetDropoutSeed(5)
		for range 3 {
			if _, err := m.Step(idx, tgt); err != nil {
				return nil, nil, err
			}
		}
		return modelGrads(m), m.RNGState(), nil
	}
	t := r.AddTable("Dropout in a recomputation, and a stateful update replayed (tiny, layer 0 recomputed, 3 steps)",
		reports.Text("run"), reports.Text("gradients = none"), reports.Significant("max |diff|", 3),
		reports.Text("stream = none"), reports.Float("running mean", 6), reports.Int("updates"))
	stateful := func(preserve bool) models.ModelOption {
		return models.WithRNG(models.RNGOptions{Kind: models.Stateful, Preserve: preserve})
	}
	plainG, plainS, err := step(models.PlainStepSchedule(mc), stateful(true))
	if err != nil {
		return err
	}
	keptG, keptS, err := step(ck, stateful(true))
	if err != nil {
		return err
	}
	naiveG, naiveS, err := step(ck, stateful(false))
	if err != nil {
		return err
	}
	diff := func(a, b map[string][]float32) float64 {
		d := 0.0
		for n, g := range a {
			for i, v := range g {
				d = math.Max(d, math.Abs(float64(v)-float64(b[n][i])))
			}
		}
		return d
	}
	t.Row("none, stateful generator", "-", 0.0, "-", math.NaN(), 0)
	t.Row("checkpointed, state restored", yesNo(sameGrads(keptG, plainG)), diff(keptG, plainG), yesNo(string(keptS) == string(plainS)), math.NaN(), 0)
	t.Row("checkpointed, not restored", yesNo(sameGrads(naiveG, plainG)), diff(naiveG, plainG), yesNo(string(naiveS) == string(plainS)), math.NaN(), 0)
	r.Check("negative control: without the generator's restore the recomputation's gradients differ",
		!sameGrads(naiveG, plainG) && string(naiveS) != string(plainS),
		"max |gradient difference| %.3g; with the restore %.3g", diff(naiveG, plainG), diff(keptG, plainG))
	mean := func(s models.StepSchedule, guard bool) (models.RunningMean, error) {
		stat := &models.RunningMean{Momentum: 0.1}
		_, _, err := step(s, models.WithRunningMean(stat, guard))
		return *stat, err
	}
	for _, rc := range []struct {
		name  string
		s     models.StepSchedule
		guard bool
	}{{"running mean: none", models.PlainStepSchedule(mc), true}, {"running mean: checkpointed, guarded", ck, true},
		{"running mean: checkpointed, naive", ck, false}} {
		st, err := mean(rc.s, rc.guard)
		if err != nil {
			return err
		}
		t.Row(rc.name, "-", math.NaN(), "-", st.Mean, st.Updates)
	}
	plain, _ := mean(models.PlainStepSchedule(mc), true)
	guarded, _ := mean(ck, true)
	naive, _ := mean(ck, false)
	r.Check("a recomputed stateful update runs on the first pass only when guarded", guarded == plain && naive.Updates == 2*plain.Updates && naive.Mean != plain.Mean,
		"updates: none %d, guarded %d, naive %d; mean none %.6g, naive %.6g", plain.Updates, guarded.Updates, naive.Updates, plain.Mean, naive.Mean)
	return nil
}
