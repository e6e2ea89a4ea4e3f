package reuse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gptlab/experiments/lab"
	"gptlab/planner"
	"gptlab/reports"
)

// This file is the reuse lab: the chapter's worked examples of buffer
// liveness and reuse, planned by every registered planner, each plan
// verified twice (a sweep and a byte-pattern simulation) before any figure
// is reported. A plan that fails verification stops the lab with an error.

// reuseConfig holds the lab's settings and their defaults.
type reuseConfig struct {
	Alignment int64    `set:"alignment" help:"bytes every offset is a multiple of (a power of two)"`
	Algos     []string `set:"algos" help:"planners to compare, comma-separated (empty: every registered planner; the report names them)"`
	Seeds     int      `set:"seeds" help:"random problems planned by each planner"`
	RandomN   int      `set:"random-n" help:"temporaries in each random problem"`
	Instances string   `set:"instances" help:"directory of MiniMalloc CSV files to plan as well (auto: ../shared/data/minimalloc where it is; empty: none)"`
	ScaleN    int      `set:"scale-n" help:"temporaries in the largest scale problem (0: skip the scale table)"`
}

// Lab is the reuse lab.
var Lab = lab.New("reuse", "buffer liveness and reuse: planners, lower bound, verified by simulation",
	reuseConfig{Alignment: 64, Algos: []string{}, Seeds: 20, RandomN: 200, Instances: "auto", ScaleN: 100_000}, reuseQuick, runReuse)

// reuseQuick plans fewer and smaller random problems and a smaller scale.
func reuseQuick(c *reuseConfig) {
	c.Seeds, c.RandomN, c.ScaleN = min(c.Seeds, 5), min(c.RandomN, 60), min(c.ScaleN, 10_000)
}

// reusePlanned is one planner's verified plan of one problem.
type reusePlanned struct {
	algo planner.Algorithm
	plan planner.Plan
	took time.Duration
}

func runReuse(ctx context.Context, cfg *reuseConfig, opt lab.Options) (*reports.Report, error) {
	algos, err := reuseAlgos(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Algos = cfg.Algos[:0] // the report's config names the planners that ran
	for _, a := range algos {
		cfg.Algos = append(cfg.Algos, a.Name)
	}
	seeds, n := cfg.Seeds, cfg.RandomN
	r := reports.New("reuse", "Buffer liveness and reuse")
	align := cfg.Alignment
	r.Note("Every plan in this report was verified twice before it was reported: a sweep over time that keeps the live buffers ordered by offset, and a byte-pattern execution that writes each buffer's own pattern when it is written and reads it back at its last use. A plan failing either stops the lab with an error. Sizes are rounded up to the alignment (%d B) and every offset is a multiple of it. \"slots\" counts distinct offsets; a plan's time is the planner alone, not the checks.", align)

	steps := []func() error{
		func() error { return reuseABC(ctx, r, algos, align) },
		func() error { return reuseChain(ctx, r, algos, align) },
		func() error { return reuseTouching(ctx, r, algos) },
		func() error { return reuseBranched(ctx, r, algos, align) },
		func() error { return reuseStreams(ctx, r, algos, align) },
		func() error { return reuseRandom(ctx, r, algos, align, opt.Seed, seeds, n) },
		func() error { return reuseRefusals(r) },
	}
	if cfg.ScaleN > 0 {
		steps = append(steps, func() error { return reuseScale(ctx, r, algos, align, opt.Seed, cfg.ScaleN) })
	}
	switch dir, err := minimallocDir(cfg.Instances); {
	case err != nil:
		r.Note("MiniMalloc's benchmark instances were not planned: %v. They are not part of the repository; --set instances=DIR names a directory of them.", err)
		r.Metric("minimalloc_instances", math.NaN())
		r.Metric("minimalloc_fit", math.NaN())
	case dir != "":
		steps = append(steps, func() error { return reuseInstances(ctx, r, algos, dir) })
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := step(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// reuseAlgos checks the settings and resolves the planners to compare.
func reuseAlgos(cfg *reuseConfig) ([]planner.Algorithm, error) {
	if err := lab.CheckAlignment(cfg.Alignment); err != nil {
		return nil, err
	}
	if cfg.Seeds < 1 || cfg.Seeds > 10_000 {
		return nil, lab.Usagef("--set seeds=%d: want 1 to 10000", cfg.Seeds)
	}
	if cfg.RandomN < 1 || cfg.RandomN > 1_000_000 {
		return nil, lab.Usagef("--set random-n=%d: want 1 to 1000000", cfg.RandomN)
	}
	if cfg.ScaleN < 0 || cfg.ScaleN > 10_000_000 {
		return nil, lab.Usagef("--set scale-n=%d: want 0 to 10000000", cfg.ScaleN)
	}
	if cfg.Instances != "" && cfg.Instances != "auto" {
		if files, _ := filepath.Glob(filepath.Join(cfg.Instances, "*.csv")); len(files) == 0 {
			return nil, lab.Usagef("--set instances=%s: no CSV files there", cfg.Instances)
		}
	}
	if len(cfg.Algos) == 0 {
		return planner.Algorithms(), nil
	}
	var algos []planner.Algorithm
	for _, name := range cfg.Algos {
		a, err := planner.Lookup(name)
		if err != nil {
			return nil, lab.Usagef("--set algos=%s: %v", strings.Join(cfg.Algos, ","), err)
		}
		algos = append(algos, a)
	}
	return algos, nil
}

// reusePlanAll plans p with every planner, verifying each plan; a plan that
// fails verification is an error naming the planner and the problem.
func reusePlanAll(ctx context.Context, what string, p planner.Problem, algos []planner.Algorithm) ([]reusePlanned, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]reusePlanned, 0, len(algos))
	for _, a := range algos {
		t0 := time.Now()
		pl, err := a.Place(ctx, p)
		took := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("%s: planner %s: %w", what, a.Name, err)
		}
		if err := planner.Check(p, pl); err != nil {
			return nil, fmt.Errorf("%s: planner %s: plan fails verification: %w", what, a.Name, err)
		}
		out = append(out, reusePlanned{algo: a, plan: pl, took: took})
	}
	return out, nil
}

// reuseTable plans p with every planner and adds the standard table.
func reuseTable(ctx context.Context, r *reports.Report, title string, p planner.Problem, algos []planner.Algorithm) ([]reusePlanned, error) {
	plans, err := reusePlanAll(ctx, title, p, algos)
	if err != nil {
		return nil, err
	}
	t := r.AddTable(title, reports.Text("planner"), reports.Bytes("peak"), reports.Ratio("peak / bound"),
		reports.Percent("saved vs naive", 1), reports.Int("slots"), reports.Duration("plan", time.Microsecond, 1))
	bound, naive := p.Bound(), p.Naive()
	t.Constant(reports.Bytes("lower bound"), bound)
	t.Constant(reports.Bytes("naive"), naive)
	for _, pp := range plans {
		t.Row(pp.algo.Name, pp.plan.Peak, lab.Ratio(pp.plan.Peak, bound),
			float64(naive-pp.plan.Peak)/float64(max(naive, 1)), pp.plan.Slots(), pp.took)
	}
	for _, pp := range plans {
		if pp.plan.Peak < bound {
			r.Check(title+": "+pp.algo.Name+" respects the lower bound", false,
				"peak %d below the bound %d: the bound or the verifier is wrong", pp.plan.Peak, bound)
		}
	}
	return plans, nil
}

// reusePeak returns the peak of the named planner's plan, or -1.
func reusePeak(plans []reusePlanned, name string) int64 {
	for _, pp := range plans {
		if pp.algo.Name == name {
			return pp.plan.Peak
		}
	}
	return -1
}

// reuseRoundUp rounds x up to a multiple of align, a power of two.
func reuseRoundUp(x, align int64) int64 { return (x + align - 1) &^ (align - 1) }

func reuseRandom(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align, seed int64, seeds, n int) error {
	spec := planner.RandomSpec{N: n, Horizon: int64(max(n/2, 1)), MaxLife: 12, MinSize: 256, MaxSize: 64 << 10}
	type acc struct {
		sum, worst, best float64
		saved, slots     float64
		took             time.Duration
		ok               int
	}
	stats := make([]acc, len(algos))
	for k := range stats {
		stats[k].best = math.Inf(1)
	}
	for s := range seeds {
		p := planner.Problem{Buffers: planner.Random(uint64(seed)*1_000_003+uint64(s), spec), Alignment: align}
		plans, err := reusePlanAll(ctx, fmt.Sprintf("random problem %d", s), p, algos)
		if err != nil {
			return err
		}
		bound, naive := p.Bound(), p.Naive()
		for k, pp := range plans {
			q := lab.Ratio(pp.plan.Peak, bound)
			st := &stats[k]
			st.sum += q
			st.worst, st.best = max(st.worst, q), min(st.best, q)
			st.saved += float64(naive-pp.plan.Peak) / float64(naive)
			st.took += pp.took
			st.slots += float64(pp.plan.Slots())
			if pp.plan.Peak >= bound {
				st.ok++
			}
		}
	}
	t := r.AddTable(fmt.Sprintf("Random lifetimes: %d problems of %d temporaries (start uniform over %d steps, life 1-%d steps, %s to %s)",
		seeds, n, spec.Horizon, spec.MaxLife, planner.FormatBytes(spec.MinSize), planner.FormatBytes(spec.MaxSize)),
		reports.Text("planner"), reports.Ratio("mean peak / bound"), reports.Ratio("best"), reports.Ratio("worst"),
		reports.Percent("mean saved vs naive", 1), reports.Float("mean slots", 1), reports.Duration("mean plan", time.Microsecond, 1))
	for k, a := range algos {
		st := stats[k]
		t.Row(a.Name, st.sum/float64(seeds), st.best, st.worst,
			st.saved/float64(seeds), st.slots/float64(seeds), st.took/time.Duration(seeds))
		r.Check("random lifetimes: "+a.Name+" never beats the lower bound", st.ok == seeds,
			"%d of %d plans at or above the bound (worst ratio %.4f, best %.4f)", st.ok, seeds, st.worst, st.best)
		key := "random_" + strings.ReplaceAll(a.Name, "-", "_")
		r.Metric(key+"_mean_ratio", st.sum/float64(seeds))
		r.Metric(key+"_max_ratio", st.worst)
	}
	return nil
}

// reuseRefusals judges in-place and donation requests and tabulates the
// verdicts with their reasons.
func reuseRefusals(r *reports.Report) error {
	const mib = 1 << 20
	chain := planner.ResidualChain(64*mib, false)
	owned := planner.ResidualChain(64*mib, false)
	owned.Inputs = []string{"x"}
	donated := owned
	donated.Donated = []string{"x"}
	bigger := planner.ResidualChain(64*mib, false)
	bigger.Ops[2].Size = 128 * mib
	br := planner.Branched(false)
	tests := []struct {
		program, request string
		p                planner.Program
		op               int
		in               string
		legal            bool
	}{
		{"residual chain", "bias writes b over a", chain, 2, "a", true},
		{"residual chain", "gelu+add writes c over b", chain, 3, "b", true},
		{"residual chain", "matmul writes a over x", chain, 1, "x", false},
		{"residual chain", "matmul writes a over the weight W", chain, 1, "W", false},
		{"chain, x the caller's", "gelu+add writes c over x", owned, 3, "x", false},
		{"chain, x donated", "gelu+add writes c over x", donated, 3, "x", true},
		{"chain, bias output 128 MiB", "bias writes b over a", bigger, 2, "a", false},
		{"branched graph", "pool writes p over r (retained)", br, 3, "r", false},
		{"branched graph", "upsample writes q over p", br, 6, "p", false},
		{"branched graph", "head writes y over the view f", br, 9, "f", false},
		{"branched graph", "gelu writes t over s", br, 5, "s", true},
	}
	t := r.AddTable("In-place and donation requests", reports.Text("program"), reports.Text("request"),
		reports.Text("verdict"), reports.Text("reason"))
	wrong := 0
	for _, tc := range tests {
		err := tc.p.Legal(tc.op, tc.in)
		if err != nil && !errors.Is(err, planner.ErrRefused) {
			return err
		}
		verdict, reason := "allowed", "the op is the last reader and the storage is the program's"
		var refusal *planner.Refusal
		if errors.As(err, &refusal) {
			verdict, reason = "refused", refusal.Reason
		}
		t.Row(tc.program, tc.request, verdict, reason)
		if (err == nil) != tc.legal {
			wrong++
		}
	}
	r.Check("in-place and donation requests judged as the rules say", wrong == 0,
		"%d requests, %d judged otherwise", len(tests), wrong)
	return nil
}

// minimallocDir resolves the instances setting: "auto" is the shared
// directory's data/minimalloc, an error where it is absent; "" is none.
func minimallocDir(set string) (string, error) {
	if set != "auto" {
		return set, nil
	}
	return lab.Shared(filepath.Join("data", "minimalloc"))
}

// reuseInstances plans every CSV file in dir (MiniMalloc's format). The
// metrics count the instances with a capacity in their name and those the
// search fits in it.
//
// The fit is decided as MiniMalloc's benchmark poses it: the search is
// given the capacity and stops at the first plan under it. The table's
// search row minimises the peak instead, toward the lower bound, until its
// node budget (or its wall-clock cap, on a slow or busy machine) ends it;
// deciding the fit on that run would make the verdict depend on the
// machine's speed.
func reuseInstances(ctx context.Context, r *reports.Report, algos []planner.Algorithm, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	if err != nil || len(files) == 0 {
		return lab.Usagef("--set instances=%s: no CSV files there", dir)
	}
	slices.Sort(files)
	t := r.AddTable("Instances from "+dir+" (capacity from a file named NAME.CAPACITY.csv, as MiniMalloc's are)",
		reports.Text("file"), reports.Int("buffers"), reports.Text("planner"), reports.Bytes("peak"), reports.Bytes("lower bound"),
		reports.Ratio("peak / bound"), reports.Ratio("peak / capacity"), reports.Duration("plan", time.Millisecond, 1))
	searched, fit := 0, 0
	var slowest instanceFit
	var misses []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return lab.Usagef("--set instances: %v", err)
		}
		bufs, _, err := planner.ReadCSV(f)
		f.Close()
		if err != nil {
			return lab.Usagef("%s: %v", file, err)
		}
		name := filepath.Base(file)
		p := planner.Problem{Buffers: bufs, Alignment: 1}
		plans, err := reusePlanAll(ctx, name, p, algos)
		if err != nil {
			return err
		}
		capacity, known := planner.CapacityFromFilename(file)
		for _, pp := range plans {
			var perCap any = "-"
			if known {
				perCap = lab.Ratio(pp.plan.Peak, capacity)
			}
			t.Row(name, len(bufs), pp.algo.Name, pp.plan.Peak, p.Bound(), lab.Ratio(pp.plan.Peak, p.Bound()),
				perCap, pp.took)
		}
		if !known || !slices.ContainsFunc(algos, func(a planner.Algorithm) bool { return a.Name == "search" }) {
			continue
		}
		searched++
		got, err := fitInstance(ctx, name, p, capacity)
		if err != nil {
			return err
		}
		if got.took > slowest.took {
			slowest = got
		}
		if got.fits && got.took < instanceFitLimit {
			fit++
		} else {
			misses = append(misses, got.String())
		}
	}
	if searched == 0 {
		r.Metric("minimalloc_instances", math.NaN())
		r.Metric("minimalloc_fit", math.NaN())
		return nil
	}
	r.Metric("minimalloc_instances", searched)
	r.Metric("minimalloc_fit", fit)
	const what = "search, given each instance's capacity, fits it, each in under 10 s"
	if len(misses) == 0 {
		r.Check(what, true, "%d instances; the slowest: %s", searched, slowest)
	} else {
		r.Check(what, false, "%d of %d did not: %s", len(misses), searched, strings.Join(misses, "; "))
	}
	return nil
}

// instanceFitLimit is the time the fit check allows one instance: the
// search's own wall-clock cap, far above the tenths of a second the
// challenge instances take.
const instanceFitLimit = planner.DefaultSearchDeadline

// instanceFit is one instance searched with its capacity given.
type instanceFit struct {
	name     string
	peak     int64 // the plan's peak; 0 if none fit
	capacity int64
	nodes    int64
	fits     bool
	took     time.Duration
}

func (f instanceFit) String() string {
	if !f.fits {
		return fmt.Sprintf("%s: no plan under %d after %d nodes, %.0f ms", f.name, f.capacity, f.nodes, float64(f.took.Milliseconds()))
	}
	return fmt.Sprintf("%s: peak %d of %d after %d nodes, %.0f ms", f.name, f.peak, f.capacity, f.nodes, float64(f.took.Milliseconds()))
}

// fitInstance searches p for a plan within capacity and verifies the plan
// it finds. Only a plan that fails verification is an error; none found is
// a miss.
func fitInstance(ctx context.Context, name string, p planner.Problem, capacity int64) (instanceFit, error) {
	var st planner.SearchStats
	t0 := time.Now()
	pl, err := planner.Search(ctx, p, planner.SearchOptions{Capacity: capacity, Stats: &st})
	got := instanceFit{name: name, capacity: capacity, nodes: st.Nodes, took: time.Since(t0)}
	switch {
	case ctx.Err() != nil:
		return got, ctx.Err()
	case errors.Is(err, planner.ErrNoFit):
		return got, nil
	case err != nil:
		return got, fmt.Errorf("%s: search with capacity %d: %w", name, capacity, err)
	}
	if err := planner.Check(p, pl); err != nil {
		return got, fmt.Errorf("%s: search with capacity %d: plan fails verification: %w", name, capacity, err)
	}
	got.peak, got.fits = pl.Peak, pl.Peak <= capacity
	return got, nil
}

// reuseScale times the O(n log n) planner and both verifiers, and TFLite's
// greedy-by-size, on long random schedules of n/10 and n temporaries. The
// search and any other registered planner are left out: they are built
// for small hard instances, not for a million buffers.
func reuseScale(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align, seed int64, n int) error {
	t := r.AddTable("Scale: long random schedules, plan and verification times",
		reports.Text("planner"), reports.Int("n"), reports.Int("most live at once"), reports.Ratio("peak / bound"),
		reports.Duration("plan", time.Millisecond, 1), reports.Float("plan ns / buffer", 0),
		reports.Duration("sweep", time.Millisecond, 1), reports.Duration("simulation", time.Millisecond, 1),
		reports.Float("check ns / buffer", 0))
	for _, size := range []int{max(n/10, 1), n} {
		p := planner.Problem{Buffers: planner.Random(uint64(seed)+uint64(size), planner.ScaleSpec(size)), Alignment: align}
		bound := p.Bound()
		count := slices.Clone(p.Buffers)
		for i := range count {
			count[i].Size = 1
		}
		live := planner.LowerBound(count) // most buffers live at one instant
		for _, a := range algos {
			if a.Name != "best-fit" && a.Name != "greedy-by-size" {
				continue
			}
			t0 := time.Now()
			pl, err := a.Place(ctx, p)
			took := time.Since(t0)
			if err != nil {
				return fmt.Errorf("scale %d: %s: %w", size, a.Name, err)
			}
			t1 := time.Now()
			if err := planner.VerifyNoOverlap(p, pl); err != nil {
				return fmt.Errorf("scale %d: %s: %w", size, a.Name, err)
			}
			t2 := time.Now()
			if err := planner.Simulate(p, pl); err != nil {
				return fmt.Errorf("scale %d: %s: %w", size, a.Name, err)
			}
			sweep, sim := t2.Sub(t1), time.Since(t2)
			if err := planner.Check(p, pl); err != nil { // both again, and the rest of the checks
				return fmt.Errorf("scale %d: %s: %w", size, a.Name, err)
			}
			t.Row(a.Name, size, live, lab.Ratio(pl.Peak, bound), took, float64(took.Nanoseconds())/float64(size),
				sweep, sim, float64((sweep+sim).Nanoseconds())/float64(size))
		}
	}
	r.Note("Scale: best-fit and both verifiers are O(n log n) (sorts, heaps and a 64-ary bit tree), so their time per buffer grows only slowly from n/10 to n; greedy-by-size is TFLite's algorithm, O(n²) when every buffer overlaps every other, and here pays for the k buffers each one overlaps. The sweep and the simulation are timed each on its own; check ns / buffer is their sum per buffer. Times are wall clock on a shared machine: compare ratios within one run.")
	return nil
}
