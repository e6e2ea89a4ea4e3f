package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gptlab/experiments/lab"
	"gptlab/planner"
	"gptlab/reports"
)

// This file is the `gptlab plan` command: plan a MiniMalloc CSV file,
// verify the plan, print the peak beside the lower bound, and optionally
// write the solution (the input's columns plus offset).

func init() {
	RegisterCommand(&Command{
		Name:  "plan",
		Usage: "FILE.csv [--algo NAME] [--capacity BYTES] [--time-limit D] [--out SOLUTION.csv]",
		Short: "plan a MiniMalloc CSV file, verify the plan, compare its peak with the lower bound",
		Long: "The default planner, auto, never fails for size: it runs best-fit (O(n log n)) to the end, " +
			"then greedy-by-size and the search as long as --time-limit allows, and keeps the best plan that " +
			"passes verification, saying which planner made it. A capacity (--capacity, or a file name such " +
			"as A.1048576.csv) is a check: a plan above it exits 1.",
		Setup: planCommand,
	})
}

// autoAlgo is the name of the default planner.
const autoAlgo = "auto"

// Limits of a plan input: beyond them the file is refused (exit 2)
// rather than exhausting memory. Variables, so that tests can lower them.
var (
	maxPlanFileBytes int64 = 1 << 30
	maxPlanBuffers         = 10_000_000
)

func planCommand(fs *flag.FlagSet) Runner {
	algo := fs.String("algo", autoAlgo, "planner `NAME`: auto (the best verified plan within the time limit), "+algoNames())
	capacity := fs.Int64("capacity", 0, "arena size `BYTES` to fit (0: from a MiniMalloc file name such as A.1048576.csv, else none)")
	limit := fs.Duration("time-limit", 10*time.Second, "time `D` auto gives greedy-by-size and the search (best-fit always runs to the end)")
	out := fs.String("out", "", "write the solution CSV (the input's columns and offset) to `SOLUTION.csv`")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		switch len(args) {
		case 0:
			return lab.Usagef("plan: no input file (gptlab help plan)")
		case 1:
		default:
			return lab.Usagef("plan: one input file, got %d: %q", len(args), args)
		}
		file := args[0]
		switch {
		case *capacity < 0:
			return lab.Usagef("plan --capacity %d: must not be negative", *capacity)
		case *limit <= 0:
			return lab.Usagef("plan --time-limit %v: want a positive duration", *limit)
		}
		if *algo != autoAlgo {
			if _, err := planner.Lookup(*algo); err != nil {
				return lab.Usagef("plan --algo %s: unknown planner (want auto, %s)", *algo, algoNames())
			}
		}
		if *out != "" {
			if err := checkOutFile("plan --out", *out); err != nil {
				return err
			}
		}
		status := lab.NewStatus(stderr) // a sign of life on a terminal: a million rows take seconds
		defer status.Clear()
		status.Say("plan: reading %s", file)
		p, given, err := readPlanFile(file)
		if err != nil {
			return err
		}
		capSource := "--capacity"
		if *capacity == 0 {
			if c, ok := planner.CapacityFromFilename(file); ok {
				*capacity, capSource = c, "the file name"
			}
		}
		status.Say("plan: placing %s with %s", reports.Count(len(p.Buffers), "buffer"), *algo)
		t0 := time.Now()
		res, err := planWith(ctx, *algo, p, *capacity, *limit)
		took := time.Since(t0)
		status.Clear()
		if ctx.Err() != nil {
			return lab.Interruptedf("interrupted while planning %s; nothing saved", file)
		}
		if err != nil {
			return fmt.Errorf("plan: %s: %w", file, err)
		}
		pl := res.plan
		bound := p.Bound()
		fmt.Fprintf(stdout, "file:        %s (%s)\n", file, reports.Count(len(p.Buffers), "buffer"))
		fmt.Fprintf(stdout, "planner:     %s\n", res.name)
		if len(res.tried) > 0 {
			for i, l := range reports.Wrap(strings.Join(res.tried, "; "), reports.Width-13) {
				head := "tried:       "
				if i > 0 {
					head = strings.Repeat(" ", 13)
				}
				fmt.Fprintln(stdout, head+l)
			}
		}
		fmt.Fprintf(stdout, "peak:        %d bytes (%s)\n", pl.Peak, planner.FormatBytes(pl.Peak))
		fmt.Fprintf(stdout, "lower bound: %d bytes (most bytes live at one instant)\n", bound)
		fmt.Fprintf(stdout, "peak/bound:  %.4f\n", lab.Ratio(pl.Peak, bound))
		fmt.Fprintf(stdout, "naive:       %d bytes (every buffer its own storage)\n", p.Naive())
		fmt.Fprintf(stdout, "time:        %.3f ms\n", float64(took.Nanoseconds())/1e6)
		fmt.Fprintf(stdout, "verified:    yes (overlap sweep and byte-pattern simulation)\n")
		fits := *capacity == 0 || pl.Peak <= *capacity
		if *capacity > 0 {
			fmt.Fprintf(stdout, "capacity:    %d bytes (from %s): %s\n", *capacity, capSource, map[bool]string{true: "fits", false: "DOES NOT FIT"}[fits])
		}
		if given != nil {
			gp := planner.Plan{Offsets: given, Peak: p.PeakOf(given)}
			verdict := "verified"
			if err := planner.Check(p, gp); err != nil {
				if !errors.Is(err, planner.ErrBadPlan) {
					return lab.Usagef("plan: %s: the file's offsets cannot be verified: %v", file, err)
				}
				verdict = "REJECTED: " + err.Error()
			}
			fmt.Fprintf(stdout, "file offsets: peak %d bytes, %s\n", gp.Peak, verdict)
		}
		if *out != "" {
			write := func(w io.Writer) error { return planner.WriteCSV(w, p.Buffers, pl.Offsets) }
			if err := reports.WriteFileAtomic(*out, reports.WriterFunc(write)); err != nil {
				return lab.Usagef("plan --out %s: %v", *out, err)
			}
			fmt.Fprintf(stdout, "solution:    %s\n", *out)
		}
		if !fits {
			return errChecksFailed
		}
		return nil
	}
}

// roundDuration keeps three or so significant digits: 21µs, 778ms, 9.3s.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// algoNames lists the registered planners: "independent, best-fit, …".
func algoNames() string {
	var names []string
	for _, a := range planner.Algorithms() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// readPlanFile reads and validates a planning problem; every fault is bad
// input naming the file.
func readPlanFile(file string) (planner.Problem, []int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return planner.Problem{}, nil, lab.Usagef("plan: %s: %v", file, pathCause(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxPlanFileBytes {
		return planner.Problem{}, nil, lab.Usagef("plan: %s: %d bytes, more than the %d a plan input may have", file, st.Size(), maxPlanFileBytes)
	}
	bufs, given, err := planner.ReadCSV(f)
	if err != nil {
		return planner.Problem{}, nil, lab.Usagef("plan: %s: %v", file, err)
	}
	if len(bufs) > maxPlanBuffers {
		return planner.Problem{}, nil, lab.Usagef("plan: %s: %s, more than the %d gptlab plans", file, reports.Count(len(bufs), "buffer"), maxPlanBuffers)
	}
	p := planner.Problem{Buffers: bufs, Alignment: 1}
	if err := p.Validate(); err != nil {
		return planner.Problem{}, nil, lab.Usagef("plan: %s: %v", file, err)
	}
	return p, given, nil
}

// planResult is a verified plan and what made it.
type planResult struct {
	plan  planner.Plan
	name  string   // the planner whose plan it is, with how it was chosen
	tried []string // auto: what each planner did
}

// planWith plans p with the named planner, or with auto, and verifies the
// plan. A plan that fails verification is an error (a planner bug); one
// too large to verify by simulation is bad input.
func planWith(ctx context.Context, name string, p planner.Problem, capacity int64, limit time.Duration) (planResult, error) {
	if name == autoAlgo {
		return planAuto(ctx, p, capacity, limit)
	}
	a, _ := planner.Lookup(name)
	var pl planner.Plan
	var err error
	if a.Name == "search" && capacity > 0 {
		// Aim at the capacity: the search stops at the first plan that fits.
		pl, err = planner.Search(ctx, p, planner.SearchOptions{Capacity: capacity})
		if errors.Is(err, planner.ErrNoFit) {
			pl, err = a.Place(ctx, p)
		}
	} else {
		pl, err = a.Place(ctx, p)
	}
	if err != nil {
		return planResult{}, fmt.Errorf("planner %s: %w", a.Name, err)
	}
	if err := verifyPlan(p, pl, a.Name); err != nil {
		return planResult{}, err
	}
	return planResult{plan: pl, name: a.Name}, nil
}

// verifyPlan checks pl by sweep and simulation.
func verifyPlan(p planner.Problem, pl planner.Plan, name string) error {
	err := planner.Check(p, pl)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, planner.ErrBadPlan):
		return fmt.Errorf("planner %s made a plan that fails verification: %w", name, err)
	}
	return lab.Usagef("the plan of %s cannot be verified: %v", name, err)
}

// planAuto is the default planner: best-fit to the end (its O(n log n)
// makes it the plan always there), then greedy-by-size and the search
// within limit, each kept if it is lower; the plan kept is verified. A
// planner that runs out of time, or a problem too large to search, is
// said, never an error.
func planAuto(ctx context.Context, p planner.Problem, capacity int64, limit time.Duration) (planResult, error) {
	deadline := time.Now().Add(limit)
	var best planResult
	note := func(format string, args ...any) { best.tried = append(best.tried, fmt.Sprintf(format, args...)) }
	for _, name := range []string{"best-fit", "greedy-by-size", "search"} {
		if ctx.Err() != nil {
			return planResult{}, ctx.Err()
		}
		if best.name != "" && capacity > 0 && best.plan.Peak <= capacity {
			note("%s not run: the plan fits the capacity", name)
			continue
		}
		a, err := planner.Lookup(name)
		if err != nil {
			continue // not registered in this build
		}
		runCtx, cancel := ctx, context.CancelFunc(func() {})
		if best.name != "" { // best-fit, the first, always runs to the end
			if time.Until(deadline) <= 0 {
				note("%s not run: no time left", name)
				continue
			}
			runCtx, cancel = context.WithDeadline(ctx, deadline)
		}
		t0 := time.Now()
		var pl planner.Plan
		if name == "search" {
			pl, err = planner.Search(runCtx, p, planner.SearchOptions{Capacity: capacity, Deadline: time.Until(deadline)})
			if errors.Is(err, planner.ErrNoFit) {
				err = errors.New("no plan under the capacity found")
			}
		} else {
			pl, err = a.Place(runCtx, p)
		}
		took := time.Since(t0)
		timedOut := runCtx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return planResult{}, ctx.Err()
		case err != nil && timedOut:
			note("%s stopped at the time limit", name)
			continue
		case err != nil:
			note("%s: %s", name, strings.TrimPrefix(err.Error(), name+": "))
			continue
		}
		note("%s %d bytes in %s", name, pl.Peak, roundDuration(took))
		if best.name == "" || pl.Peak < best.plan.Peak {
			best.plan, best.name = pl, name
		}
	}
	if best.name == "" {
		return planResult{}, errors.New("no planner made a plan")
	}
	// Verified after the time limit, which is the planners' alone.
	if err := verifyPlan(p, best.plan, best.name); err != nil {
		return planResult{}, err
	}
	best.name = fmt.Sprintf("%s (auto: the lowest verified plan within %v)", best.name, limit)
	return best, nil
}
