package checkpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/planner/recompute"
	"gptlab/precision"
	"gptlab/reports"
)

// The checkpoint lab: the GPT's training step as a chain of half-block
// segments, run with every activation kept (none) and with checkpointing
// policies that keep less and recompute the rest before the backward that
// needs it. Every schedule is built as one graph (forwards, recomputations,
// backwards) and run in its order from one planned arena, so its memory
// is a planned, verified number and its gradients are compared with none's
// to the bit, with dropout on (masks drawn from counters inside the kernels
// that apply them, or drawn from a stateful generator that is stashed and
// restored as torch does).

// checkpointConfig holds the lab's settings.
type checkpointConfig struct {
	Configs  []string `set:"configs" help:"model shapes: tiny, small, baby, deep (baby, 16 layers), long (baby, block 256)"`
	Policies []string `set:"policies" help:"fixed policies compared with none: every:K, sqrt, selective"`
	Budgets  int      `set:"budgets" help:"budgets in the sweep, from the chain model's smallest feasible budget to none's peak"`
	Dropout  float64  `set:"dropout" help:"dropout probability"`
	Steps    int      `set:"steps" help:"timed steps per schedule (median and spread reported)"`
	Profile  int      `set:"profile-runs" help:"profiled runs of the plain step for the chain's measured times (reported only: the search uses the FLOP/byte cost)"`
	// Checkpointing composes with mixed precision: these shapes run every
	// policy again under a 16-bit policy.
	Precision       precision.Policy `set:"precision" help:"the 16-bit policy the shapes of precision-shapes run every policy under too"`
	PrecisionShapes []string         `set:"precision-shapes" help:"shapes that also run each policy under precision (peak, step time, bitwise against its none)"`
}

var checkpointDefaults = checkpointConfig{
	Configs:  []string{"tiny", "small", "baby", "deep", "long"},
	Policies: []string{"every:1", "every:2", "sqrt", "selective"},
	Budgets:  4, Dropout: 0.1, Steps: 5, Profile: 3,
	Precision: bf16, PrecisionShapes: []string{"deep", "long"},
}

var bf16, _ = precision.ParsePolicy("bf16")

// Lab is the checkpoint lab.
var Lab = lab.New("checkpoint", "gradient checkpointing: recompute with reproducible dropout, memory vs work",
	checkpointDefaults, checkpointQuick, runCheckpoint)

// checkpointQuick runs the two small shapes with three budgets and three
// timed steps.
func checkpointQuick(c *checkpointConfig) {
	c.Configs, c.Budgets, c.Steps, c.Profile = []string{"tiny", "small"}, 3, 3, 2
	c.PrecisionShapes = []string{"small"}
}

// ckShape is the model config of a shape name.
func ckShape(name string) (models.Config, error) {
	base := name
	if name == "deep" || name == "long" {
		base = "baby"
	}
	cfg, err := models.Preset(base)
	if err != nil {
		return cfg, lab.Usagef("--set configs=%s: unknown shape (want tiny, small, baby, deep or long)", name)
	}
	switch name {
	case "deep":
		cfg.Layers = 16
	case "long":
		cfg.Block = 256
	}
	return cfg, nil
}

func (c *checkpointConfig) validate() error {
	switch {
	case len(c.Configs) == 0:
		return lab.Usagef("--set configs: name at least one shape")
	case c.Budgets < 2 || c.Budgets > 20:
		return lab.Usagef("--set budgets=%d: want 2 to 20", c.Budgets)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return lab.Usagef("--set dropout=%v: want in [0, 1)", c.Dropout)
	case c.Steps < 1 || c.Steps > 1000:
		return lab.Usagef("--set steps=%d: want 1 to 1000", c.Steps)
	case c.Profile < 1 || c.Profile > 100:
		return lab.Usagef("--set profile-runs=%d: want 1 to 100", c.Profile)
	}
	if !c.Precision.Mixed() && len(c.PrecisionShapes) > 0 {
		return lab.Usagef("--set precision=%s: want a 16-bit policy (bf16, fp16, fp16-noscale), or no precision-shapes", c.Precision.Name)
	}
	for _, name := range c.PrecisionShapes {
		if !slices.Contains(c.Configs, name) {
			return lab.Usagef("--set precision-shapes=%s: not one of the configs %v", name, c.Configs)
		}
	}
	for _, name := range c.Configs {
		cfg, err := ckShape(name)
		if err != nil {
			return err
		}
		for _, pol := range c.Policies {
			p, err := lab.ParseCheckpoint("policies", pol, cfg.Layers)
			if err != nil {
				return err
			}
			if p.Kind == "none" || p.Kind == "budget" {
				return lab.Usagef("--set policies=%s: none is always run, budgets come from the sweep", pol)
			}
		}
	}
	return nil
}

func runCheckpoint(ctx context.Context, cfg *checkpointConfig, opt lab.Options) (*reports.Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := reports.New("checkpoint", "Gradient checkpointing: memory kept against work recomputed")
	pareto := newParetoFigure()
	allBitwise := true
	var targets []string
	main := cfg.Configs[len(cfg.Configs)-1] // the shape of the unprefixed metrics
	if slices.Contains(cfg.Configs, "deep") {
		main = "deep"
	}
	for _, name := range cfg.Configs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mc, _ := ckShape(name)
		mc.Dropout = cfg.Dropout
		fmt.Fprintf(opt.Log, "checkpoint: %s\n", name)
		res, err := checkpointShape(ctx, name, mc, cfg, opt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		allBitwise = allBitwise && res.bitwise
		res.report(r, name)
		pareto.add(name, res)
		targets = append(targets, res.targets(r, name, main)...)
	}
	if err := checkpointChecks(r, cfg); err != nil {
		return nil, err
	}
	r.Metric("grads_bitwise_equal", map[bool]int{true: 1, false: 0}[allBitwise])
	pareto.attach(r)
	r.Note("Peaks are the planned arena of the whole step (kept activations, recomputed ones, gradients, " +
		"temporaries); parameters, AdamW's moments, tokens and the stateful generator's masks are the caller's and not counted " +
		"(counter-based dropout stores no masks: its kernels draw them). " +
		"Recompute is the forward work run again, in FLOPs (2mnk per matrix product, one per element " +
		"otherwise), as a share of one forward. Step times are wall-clock medians; the schedules run interleaved, " +
		"a round each in turn, and ms ÷ none is the median over the rounds of the step's time over none's in the same round; " +
		"on a row with a target it is the median of that target's own rounds, each the ratio of the fastest of three " +
		"alternating steps, run on one thread with only the two models compared alive and timed on the process's CPU " +
		"time where the platform gives it (a neighbour's turns on the core left out).")
	for _, t := range targets {
		r.Note("%s", t)
	}
	return r, nil
}

// ckRow is one schedule measured on one shape.
type ckRow struct {
	name      string
	peak      int64
	kept      int64
	recompute float64         // share of one forward
	ms        float64         // median step
	slow      float64         // median over the rounds of the step ÷ none's in the same round
	timing    *reports.Timing // the ratio decided against its target (targeted rows only)
	spread    float64         // (max - min) / median
	bitwise   bool            // stateless and stateful gradients equal none's
	rng       bool            // the stateful stream after the step equals none's
	model     float64         // the chain's cost model, seconds (budget rows)
	measured  float64         // budget rows: the profiled chain's time of the schedule, seconds (0 unprofiled)
	moves     recompute.Moves // budget rows: the dynamic program's schedule
	budget    int64           // budget rows: the budget
	fixed     string          // budget rows: the fastest fixed policy within the budget
	fixedMs   float64
	fixedPeak int64
	fixedTime float64 // the cost model's of that fixed policy
}

// ckShapeResult is everything one shape measured.
type ckShapeResult struct {
	cfg       models.Config
	rows      []ckRow // none first, then the fixed policies
	mixed     []ckRow // the same under precision (none first), or none
	precision string  // the 16-bit policy of mixed
	sweep     []ckRow
	bitwise   bool
	smallest  int64
	layers    int
	scheduled map[string]models.StepSchedule
}

// checkpointShape measures none and every fixed policy on one shape, then
// the budget sweep.
func checkpointShape(ctx context.Context, name string, mc models.Config, cfg *checkpointConfig, opt lab.Options) (*ckShapeResult, error) {
	p := models.NewParams(mc, opt.Seed)
	rng := rand.New(rand.NewPCG(uint64(opt.Seed), 11))
	idx, tgt := make([]int32, mc.Batch*mc.Block), make([]int32, mc.Batch*mc.Block)
	for i := range idx {
		idx[i], tgt[i] = int32(rng.IntN(mc.Vocab)), int32(rng.IntN(mc.Vocab))
	}
	res := &ckShapeResult{cfg: mc, bitwise: true, layers: mc.Layers, scheduled: map[string]models.StepSchedule{}}
	names := append([]string{"none"}, cfg.Policies...)
	var scheds []models.StepSchedule
	for _, pol := range names {
		pp, err := lab.ParseCheckpoint("policies", pol, mc.Layers)
		if err != nil {
			return nil, err
		}
		s, err := pp.FixedSchedule(mc)
		if err != nil {
			return nil, err
		}
		scheds = append(scheds, s)
		res.scheduled[pol] = s
	}
	runs, err := runSchedules(ctx, mc, p, idx, tgt, opt.Seed, names, scheds, cfg.Steps, timedTargets(name))
	if err != nil {
		return nil, err
	}
	res.rows = runs
	if slices.Contains(cfg.PrecisionShapes, name) {
		fmt.Fprintf(opt.Log, "checkpoint: %s: every policy under %s\n", name, cfg.Precision.Name)
		if res.mixed, err = runSchedules(ctx, mc, p, idx, tgt, opt.Seed, names, scheds, cfg.Steps, nil, models.WithPrecision(cfg.Precision)); err != nil {
			return nil, err
		}
		res.precision = cfg.Precision.Name
	}
	for _, row := range append(slices.Clip(runs), res.mixed...) {
		res.bitwise = res.bitwise && row.bitwise
	}
	fmt.Fprintf(opt.Log, "checkpoint: %s: measuring the chain\n", name)
	ch, err := lab.MeasureChain(mc, p, mc.Batch, mc.Block, idx, tgt, cfg.Profile)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := res.sweepBudgets(ctx, ch, p, idx, tgt, opt.Seed, cfg); err != nil {
		return nil, err
	}
	return res, nil
}

// scheduleRun is a compiled schedule and what its step gave.
type scheduleRun struct {
	m        *models.Model
	grads    map[string][]float32
	loss     float32
	stateful map[string][]float32
	stream   []byte
	times    []float64
}

// runSchedules compiles each schedule, runs its step stateless and with
// the stateful generator (restored around recomputations), compares both
// with the first schedule's (none), and times the steps interleaved. A
// schedule with a target in timed gets more rounds beside none's until
// its step-time ratio is decided (lab.RatioTarget).
func runSchedules(ctx context.Context, mc models.Config, p *models.Params, idx, tgt []int32, seed int64, names []string, scheds []models.StepSchedule, steps int, timed []ckTarget, opts ...models.ModelOption) ([]ckRow, error) {
	runs := make([]*scheduleRun, len(scheds))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.m.Close()
			}
		}
	}()
	for i, s := range scheds {
		m, err := models.NewModel(mc, p, mc.Batch, mc.Block, true, append(slices.Clip(opts), models.WithStepSchedule(s))...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
		runs[i] = &scheduleRun{m: m}
		m.SetDropoutSeed(seed)
		m.SetDropoutKey(0)
		if runs[i].loss, err = m.Step(idx, tgt); err != nil {
			return nil, err
		}
		runs[i].grads = modelGrads(m)
		sm, err := models.NewModel(mc, p, mc.Batch, mc.Block, true, append(slices.Clip(opts), models.WithStepSchedule(s),
			models.WithRNG(models.RNGOptions{Kind: models.Stateful, Preserve: true}))...)
		if err != nil {
			return nil, err
		}
		sm.SetDropoutSeed(seed)
		if _, err := sm.Step(idx, tgt); err != nil {
			sm.Close()
			return nil, err
		}
		runs[i].stateful, runs[i].stream = modelGrads(sm), sm.RNGState()
		sm.Close()
	}
	for rep := 0; rep <= steps; rep++ { // the first round warms up
		for _, r := range runs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if _, err := r.m.Step(idx, tgt); err != nil {
				return nil, err
			}
			if rep > 0 {
				r.times = append(r.times, float64(time.Since(t0).Microseconds())/1000)
			}
		}
	}
	ref := runs[0]
	fwd0, _ := ref.m.Work()
	var rows []ckRow
	for i, r := range runs {
		_, again := r.m.Work()
		ms, spread := medianSpread(r.times)
		// The slowdown is paired by round: a round runs every schedule back
		// to back, so a neighbour's load that comes and goes over seconds
		// slows both sides of a ratio, where it would move one median only.
		paired := make([]float64, len(r.times))
		for k, t := range r.times {
			paired[k] = t / ref.times[k]
		}
		slow, _ := medianSpread(paired)
		rows = append(rows, ckRow{
			name: names[i], peak: r.m.Arena().Stats().ArenaBytes, kept: r.m.KeptBytes(),
			recompute: again / fwd0, ms: ms, spread: spread, slow: slow,
			bitwise: r.loss == ref.loss && sameGrads(r.grads, ref.grads) && sameGrads(r.stateful, ref.stateful),
			rng:     slices.Equal(r.stream, ref.stream),
		})
	}
	if len(timed) == 0 {
		return rows, nil
	}
	// A target's check is decided on rounds of its own, with only the two
	// models it compares alive: the other schedules' arenas, hundreds of
	// MiB each on the long shapes, are closed first, so that the rounds
	// measure the two steps and not the memory of the others beside them.
	for i := 1; i < len(runs); i++ {
		if !slices.ContainsFunc(timed, func(tg ckTarget) bool { return tg.policy == names[i] }) {
			runs[i].m.Close()
			runs[i] = nil
		}
	}
	for i, r := range runs {
		if r == nil || i == 0 {
			continue
		}
		for _, tg := range timed {
			if tg.policy != names[i] {
				continue
			}
			tm, err := tg.sample(ctx, ref.m, r.m, idx, tgt)
			if err != nil {
				return nil, err
			}
			// The row shows the ratio its check decided on.
			rows[i].timing, rows[i].slow = &tm, tm.Median
		}
	}
	return rows, nil
}

// modelGrads copies every parameter's gradient of the model's last step.
func modelGrads(m *models.Model) map[string][]float32 {
	out := map[string][]float32{}
	for _, n := range m.Params().Names() {
		out[n] = slices.Clone(m.Grad(n))
	}
	return out
}

// sameGrads reports whether two sets of gradients are bitwise equal.
func sameGrads(a, b map[string][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for n, g := range a {
		if !slices.Equal(g, b[n]) {
			return false
		}
	}
	return true
}

// medianSpread is the median of xs and (max - min) / median.
func medianSpread(xs []float64) (float64, float64) {
	med := lab.Median(xs)
	if med == 0 {
		return 0, 0
	}
	return med, (slices.Max(xs) - slices.Min(xs)) / med
}
