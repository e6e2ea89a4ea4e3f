package reuse

// The chapter's worked examples of the reuse lab: a/b/c, the six-op
// residual chain, the off-by-one of half-open ends, and the branched graph.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot/vg"

	"gptlab/planner"
	"gptlab/reports"
)

// reuseChapter records a check of a computed figure against the chapter's.
// The chapter's figures assume no rounding; when the alignment rounds a
// size of the example (exact is false), the figure is compared with alt,
// the same quantity computed another way for the aligned problem (altName
// says which), and the detail says so.
func reuseChapter(r *reports.Report, name string, got, chapter int64, exact bool, alt int64, altName string) {
	if !exact {
		r.Check(name+" (aligned: compared with the "+altName+")", got == alt,
			"the alignment rounds the example's sizes, so the chapter's %s does not apply; computed %s, %s %s",
			planner.FormatBytes(chapter), planner.FormatBytes(got), altName, planner.FormatBytes(alt))
		return
	}
	r.Check(name, got == chapter, "computed %s, chapter %s", planner.FormatBytes(got), planner.FormatBytes(chapter))
}

// reuseUnrounded reports whether the alignment divides every size of p.
func reuseUnrounded(p planner.Problem) bool {
	for _, b := range p.Buffers {
		if b.Size%p.Alignment != 0 {
			return false
		}
	}
	return true
}

func reuseABC(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align int64) error {
	p, err := planner.Lower(planner.ABC(false), align)
	if err != nil {
		return err
	}
	plans, err := reuseTable(ctx, r, "a (1024 B, kernels 0-2), b (512 B, kernel 1), c (768 B, kernels 3-4)", p, algos)
	if err != nil {
		return err
	}
	exact := reuseUnrounded(p)
	bf := reusePeak(plans, "best-fit")
	ind, err := reusePlanAll(ctx, "a/b/c", p, reuseNamed("independent"))
	if err != nil {
		return err
	}
	reuseChapter(r, "a/b/c: best-fit arena is the chapter's 1536 B", bf, 1536, exact, p.Bound(), "lower bound")
	reuseChapter(r, "a/b/c: independent storage is the chapter's 2304 B", ind[0].plan.Peak, 2304, exact, p.Naive(), "sum of aligned sizes")
	r.Metric("planned_peak_bytes", bf)
	r.Metric("independent_bytes", ind[0].plan.Peak)

	late, err := planner.Lower(planner.ABC(true), align)
	if err != nil {
		return err
	}
	lplans, err := reuseTable(ctx, r, "The same with b produced by kernel 2 (the kernel of a's last read) and read by kernel 3", late, algos)
	if err != nil {
		return err
	}
	lbf := reusePeak(lplans, "best-fit")
	r.Metric("abc_late_b_peak_bytes", lbf)
	r.Check("a/b/c, b at kernels 2-3: b shares with nobody, arena equals the bound", lbf == late.Bound(),
		"best-fit %s, bound %s (a and b live together at kernel 2, b and c at kernel 3)", planner.FormatBytes(lbf), planner.FormatBytes(late.Bound()))
	r.Note("With b produced by kernel 2, the kernel that last reads a, b cannot take a's storage (the rule is a.Last < b.First, and 2 < 2 fails), and read by kernel 3 it cannot give its storage to c either. The arena is still %s: b never shared in the first version (it sat beside a at kernel 1, too small for c), and c still takes a's slot at kernel 3.", planner.FormatBytes(lbf))

	// The eager off-by-one: treating the inclusive last read as the
	// half-open end lets b overwrite a while kernel 2 still reads it.
	eager := late
	eager.Buffers = slices.Clone(late.Buffers)
	for i := range eager.Buffers {
		eager.Buffers[i].End--
	}
	if err := eager.Validate(); err != nil {
		return err
	}
	bug, err := reusePlanAll(ctx, "a/b/c with eager ends", eager, reuseNamed("best-fit"))
	if err != nil {
		return err
	}
	sweepErr := planner.VerifyNoOverlap(late, bug[0].plan)
	simErr := planner.Simulate(late, bug[0].plan)
	t := r.AddTable("Off by one, eager: a buffer freed at its last read rather than after it (b at kernels 2-3)",
		reports.Text("plan"), reports.Bytes("peak"), reports.Text("sweep on the true lifetimes"),
		reports.Text("simulation on the true lifetimes"))
	t.Row("best-fit, ends one step early", bug[0].plan.Peak, reuseVerdict(sweepErr), reuseVerdict(simErr))
	r.Check("eager off-by-one plan is rejected by both verifications", sweepErr != nil && simErr != nil,
		"sweep: %v; simulation: %v", sweepErr, simErr)
	return nil
}

// reuseNamed returns one of the planner package's own algorithms, which
// are always registered.
func reuseNamed(name string) []planner.Algorithm {
	a, err := planner.Lookup(name)
	if err != nil {
		panic(err)
	}
	return []planner.Algorithm{a}
}

// reuseLifetimes lists a problem's lifetimes: "[0,2) [1,3) [2,4)".
func reuseLifetimes(p planner.Problem) string {
	parts := make([]string, len(p.Buffers))
	for i, b := range p.Buffers {
		parts[i] = fmt.Sprintf("[%d,%d)", b.Start, b.End)
	}
	return strings.Join(parts, " ")
}

func reuseVerdict(err error) string {
	if err == nil {
		return "accepted"
	}
	return "rejected: " + strings.TrimPrefix(err.Error(), planner.ErrBadPlan.Error()+": ")
}

func reuseChain(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align int64) error {
	const mib = 1 << 20
	lt := r.AddTable("Six-op residual chain: lifetimes derived from the reads (one op per step)",
		reports.Int("step"), reports.Text("op"), reports.Text("writes"), reports.Text("reads"),
		reports.Int("first write"), reports.Int("last read"), reports.Text("kind"))
	chain := planner.ResidualChain(64*mib, false)
	temps, err := chain.Temps()
	if err != nil {
		return err
	}
	for i, op := range chain.Ops {
		lt.Row(i, op.Fn, op.Out, strings.Join(op.In, ", "), temps[i].First, temps[i].Last, temps[i].Kind.String())
	}
	figures := r.AddTable("Six-op residual chain: naive, reuse and in-place (best-fit), and the lower bound",
		reports.Bytes("per buffer"), reports.Text("variant"), reports.Bytes("naive"), reports.Bytes("reuse"),
		reports.Bytes("reuse + in-place"), reports.Bytes("bound (reuse)"), reports.Bytes("bound (in-place)"))
	type figs struct{ naive, reuse, inPlace, bound, inPlaceBound int64 }
	compute := func(size int64, mut func(*planner.Program), table bool) (figs, error) {
		var f figs
		for _, inPlace := range []bool{false, true} {
			prog := planner.ResidualChain(size, inPlace)
			mut(&prog)
			p, _, err := prog.Problem(align)
			if err != nil {
				return f, err
			}
			what := fmt.Sprintf("residual chain %s", planner.FormatBytes(size))
			if inPlace {
				what += " in-place"
				plans, err := reusePlanAll(ctx, what, p, algos)
				if err != nil {
					return f, err
				}
				f.inPlace, f.inPlaceBound = reusePeak(plans, "best-fit"), p.Bound()
				continue
			}
			var plans []reusePlanned
			if table {
				plans, err = reuseTable(ctx, r, "Six-op residual chain, "+planner.FormatBytes(size)+" per buffer", p, algos)
			} else {
				plans, err = reusePlanAll(ctx, what, p, algos)
			}
			if err != nil {
				return f, err
			}
			f.naive, f.reuse, f.bound = p.Naive(), reusePeak(plans, "best-fit"), p.Bound()
		}
		return f, nil
	}
	none := func(*planner.Program) {}
	var at [2]figs
	for k, size := range []int64{64 * mib, 128 * mib} {
		if at[k], err = compute(size, none, true); err != nil {
			return err
		}
		f := at[k]
		figures.Row(size, "x loaded into the arena", f.naive, f.reuse, f.inPlace, f.bound, f.inPlaceBound)
	}
	owned, err := compute(64*mib, func(p *planner.Program) { p.Inputs = []string{"x"} }, false)
	if err != nil {
		return err
	}
	figures.Row(64*mib, "x the caller's (kept to the end)", owned.naive, owned.reuse, owned.inPlace, owned.bound, owned.inPlaceBound)

	f := at[0]
	exact := align <= 64*mib
	p64, _, _ := planner.ResidualChain(64*mib, false).Problem(align)
	reuseChapter(r, "residual chain: naive is the chapter's 384 MB (MiB)", f.naive, 384*mib, exact, 6*reuseRoundUp(64*mib, align), "six aligned buffers")
	reuseChapter(r, "residual chain: reuse is the chapter's 192 MB (MiB)", f.reuse, 192*mib, exact, p64.Bound(), "lower bound")
	r.Check("residual chain: reuse equals the most bytes live at once (x, b, c at step 3)", f.reuse == f.bound,
		"best-fit %s, bound %s", planner.FormatBytes(f.reuse), planner.FormatBytes(f.bound))
	pin, _, _ := planner.ResidualChain(64*mib, true).Problem(align)
	reuseChapter(r, "residual chain: in-place folds one more slot, the chapter's 128 MB (MiB)", f.inPlace, 128*mib, exact, pin.Bound(), "lower bound")
	g := at[1]
	r.Check("residual chain: at 128 MB per buffer every figure doubles",
		g.naive == 2*f.naive && g.reuse == 2*f.reuse && g.inPlace == 2*f.inPlace && g.bound == 2*f.bound,
		"naive %s, reuse %s, in-place %s, bound %s", planner.FormatBytes(g.naive), planner.FormatBytes(g.reuse),
		planner.FormatBytes(g.inPlace), planner.FormatBytes(g.bound))
	r.Note("The residual chain's x is loaded into the arena by op 0 and is free after its last read (op 3). If x were the caller's buffer instead, kept to the end, it would hold a slot throughout: reuse stays %s, but in-place can no longer fold a slot (%s), because at step 4 x, the merged a/b/c and d are live together.",
		planner.FormatBytes(owned.reuse), planner.FormatBytes(owned.inPlace))
	r.Metric("chain_naive_bytes", f.naive)
	r.Metric("chain_reuse_bytes", f.reuse)
	r.Metric("chain_inplace_bytes", f.inPlace)
	r.Metric("chain_bound_bytes", f.bound)
	return nil
}

func reuseTouching(ctx context.Context, r *reports.Report, algos []planner.Algorithm) error {
	p, err := planner.Lower(planner.Touching(), 1)
	if err != nil {
		return err
	}
	plans, err := reuseTable(ctx, r, "Sizes 100/80/60 live at steps [0,1], [1,2], [2,3] (half-open [0,2), [1,3), [2,4)); no alignment", p, algos)
	if err != nil {
		return err
	}
	incl := p
	incl.Buffers = slices.Clone(p.Buffers)
	for i := range incl.Buffers {
		incl.Buffers[i].End++ // the bug: the half-open end read as still live
	}
	bugPlans, err := reusePlanAll(ctx, "100/80/60 with inclusive ends", incl, reuseNamed("best-fit"))
	if err != nil {
		return err
	}
	bf, bug := reusePeak(plans, "best-fit"), bugPlans[0].plan.Peak
	t := r.AddTable("Off by one, conservative: the half-open end read as inclusive",
		reports.Text("reading of [start, end)"), reports.Text("planned lifetimes"), reports.Bytes("best-fit peak"))
	t.Row("half-open (correct)", reuseLifetimes(p), bf)
	t.Row("end read as inclusive (the bug)", reuseLifetimes(incl), bug)
	r.Check("100/80/60: best-fit meets the lower bound under either reading", bf == p.Bound() && bug == incl.Bound(),
		"half-open: peak %d, bound %d; inclusive: peak %d, bound %d", bf, p.Bound(), bug, incl.Bound())
	reuseChapter(r, "100/80/60: the correct plan needs the chapter's 180 B", bf, 180, true, 0, "")
	reuseChapter(r, "100/80/60: reading the end as inclusive needs the chapter's 240 B", bug, 240, true, 0, "")
	r.Metric("touching_peak_bytes", bf)
	r.Metric("touching_inclusive_bug_bytes", bug)
	return nil
}

func reuseBranched(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align int64) error {
	prog := planner.Branched(false)
	p, temps, err := prog.Problem(align)
	if err != nil {
		return err
	}
	lt := r.AddTable("Branched graph: lifetimes (a view, a retained value, a late consumer)",
		reports.Int("step"), reports.Text("op"), reports.Text("writes"), reports.Bytes("bytes"), reports.Text("reads"),
		reports.Int("first write"), reports.Int("last read"), reports.Text("kind"), reports.Text("planned as [start, end)"))
	byID := map[string]planner.Buffer{}
	for _, b := range p.Buffers {
		byID[b.ID] = b
	}
	for i, op := range prog.Ops {
		planned := "no storage (view of " + temps[i].Of + ")"
		if b, ok := byID[op.Out]; ok {
			planned = fmt.Sprintf("[%d, %d)", b.Start, b.End)
		}
		lt.Row(i, op.Fn, op.Out, op.Size, strings.Join(op.In, ", "), temps[i].First, temps[i].Last, temps[i].Kind.String(), planned)
	}
	plans, err := reuseTable(ctx, r, "Branched graph", p, algos)
	if err != nil {
		return err
	}
	pin, _, err := planner.Branched(true).Problem(align)
	if err != nil {
		return err
	}
	inPlans, err := reuseTable(ctx, r, "Branched graph with gelu and add in place", pin, algos)
	if err != nil {
		return err
	}
	best := plans[0]
	for _, pp := range plans {
		if pp.plan.Peak < best.plan.Peak {
			best = pp
		}
	}
	bfIn := reusePeak(inPlans, "best-fit")
	r.Check("branched graph: in-place does not cost memory", bfIn <= reusePeak(plans, "best-fit"),
		"best-fit %s with in-place, %s without", planner.FormatBytes(bfIn), planner.FormatBytes(reusePeak(plans, "best-fit")))
	r.Metric("branched_naive_bytes", p.Naive())
	r.Metric("branched_bound_bytes", p.Bound())
	r.Metric("branched_best_peak_bytes", best.plan.Peak)

	naive, err := reusePlanAll(ctx, "branched graph", p, reuseNamed("independent"))
	if err != nil {
		return err
	}
	for _, fig := range []struct {
		name, title string
		plan        planner.Plan
	}{
		{"timeline-naive", "Branched graph, independent storage", naive[0].plan},
		{"timeline-planned", "Branched graph, planned by " + best.algo.Name, best.plan},
	} {
		plt, err := planner.Timeline(fig.title, p, fig.plan, p.Naive())
		if err != nil {
			return err
		}
		r.AddFigure(fig.name, plt, 6*vg.Inch, 4*vg.Inch)
	}
	r.Note("Figures timeline-naive and timeline-planned draw the branched graph as the chapter's widget does: time on x, arena offset on y, one rectangle per value over its lifetime, on the same scale. The retained r and the input x hold their bytes to the end; the view f has no rectangle of its own and keeps p alive until the head reads it at the last step.")
	return nil
}
