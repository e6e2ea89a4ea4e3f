package experiments

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"gptlab/planner"
	"gptlab/reports"
)

// This file is the `gptlab plan` command: plan a MiniMalloc CSV file with
// one planner, verify the plan, print the peak beside the lower bound, and
// optionally write the solution (the input's columns plus offset).

func init() { commands["plan"] = runPlan }

const planUsage = "usage: gptlab plan FILE.csv [--algo NAME] [--capacity BYTES] [--out SOLUTION.csv]"

// defaultPlanAlgo is the best planner available: the search if it is
// registered, else greedy-by-size.
func defaultPlanAlgo() string {
	if _, err := planner.Lookup("search"); err == nil {
		return "search"
	}
	return "greedy-by-size"
}

// planArgs parses the command line; flags may come before or after FILE.
func planArgs(args []string) (file, algo, out string, capacity int64, err error) {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&algo, "algo", defaultPlanAlgo(), "planner to use")
	fs.Int64Var(&capacity, "capacity", 0, "arena size to fit (default: from a MiniMalloc file name such as A.1048576.csv)")
	fs.StringVar(&out, "out", "", "write the solution CSV here")
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", "", "", 0, usageError("plan: %v (%s)", err, planUsage)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(files) {
	case 0:
		return "", "", "", 0, usageError("plan: no input file (%s)", planUsage)
	case 1:
		if capacity < 0 {
			return "", "", "", 0, usageError("plan --capacity %d: must not be negative", capacity)
		}
		return files[0], algo, out, capacity, nil
	}
	return "", "", "", 0, usageError("plan: one input file, got %d: %q (%s)", len(files), files, planUsage)
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	file, algoName, out, capacity, err := planArgs(args)
	if err != nil {
		return err
	}
	algo, err := planner.Lookup(algoName)
	if err != nil {
		return usageError("plan --algo %s: %v", algoName, err)
	}
	f, err := os.Open(file)
	if err != nil {
		return usageError("plan: %v", err)
	}
	bufs, given, err := planner.ReadCSV(f)
	f.Close()
	if err != nil {
		return usageError("plan: %s: %v", file, err)
	}
	p := planner.Problem{Buffers: bufs, Alignment: 1}
	if err := p.Validate(); err != nil {
		return usageError("plan: %s: %v", file, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	capSource := "--capacity"
	if capacity == 0 {
		if c, ok := planner.CapacityFromFilename(file); ok {
			capacity, capSource = c, "the file name"
		}
	}
	t0 := time.Now()
	var pl planner.Plan
	if algo.Name == "search" && capacity > 0 {
		// Aim at the capacity: the search stops at the first plan that fits.
		pl, err = planner.Search(ctx, p, planner.SearchOptions{Capacity: capacity})
		if errors.Is(err, planner.ErrNoFit) {
			pl, err = algo.Place(ctx, p)
		}
	} else {
		pl, err = algo.Place(ctx, p)
	}
	took := time.Since(t0)
	if err != nil {
		return fmt.Errorf("plan: %s: planner %s: %w", file, algo.Name, err)
	}
	if err := planner.Check(p, pl); err != nil {
		return fmt.Errorf("plan: %s: planner %s made a plan that fails verification: %w", file, algo.Name, err)
	}
	bound := p.Bound()
	fmt.Fprintf(stdout, "file:        %s (%d buffers)\n", file, len(bufs))
	fmt.Fprintf(stdout, "planner:     %s\n", algo.Name)
	fmt.Fprintf(stdout, "peak:        %d bytes (%s)\n", pl.Peak, planner.FormatBytes(pl.Peak))
	fmt.Fprintf(stdout, "lower bound: %d bytes (most bytes live at one instant)\n", bound)
	fmt.Fprintf(stdout, "peak/bound:  %.4f\n", float64(pl.Peak)/float64(bound))
	fmt.Fprintf(stdout, "naive:       %d bytes (every buffer its own storage)\n", p.Naive())
	fmt.Fprintf(stdout, "time:        %.3f ms\n", float64(took.Nanoseconds())/1e6)
	fmt.Fprintf(stdout, "verified:    yes (overlap sweep and byte-pattern simulation)\n")
	fits := capacity == 0 || pl.Peak <= capacity
	if capacity > 0 {
		fmt.Fprintf(stdout, "capacity:    %d bytes (from %s): %s\n", capacity, capSource, map[bool]string{true: "fits", false: "DOES NOT FIT"}[fits])
	}
	if given != nil {
		gp := planner.Plan{Offsets: given, Peak: p.PeakOf(given)}
		verdict := "verified"
		if err := planner.Check(p, gp); err != nil {
			verdict = "REJECTED: " + err.Error()
			if !errors.Is(err, planner.ErrBadPlan) {
				return err
			}
		}
		fmt.Fprintf(stdout, "file offsets: peak %d bytes, %s\n", gp.Peak, verdict)
	}
	if out != "" {
		write := func(w io.Writer) error { return planner.WriteCSV(w, bufs, pl.Offsets) }
		if err := reports.WriteFileAtomic(out, reports.WriterFunc(write)); err != nil {
			return usageError("plan --out %s: %v", out, err)
		}
		fmt.Fprintf(stdout, "solution:    %s\n", out)
	}
	if !fits {
		return errChecksFailed
	}
	return nil
}
