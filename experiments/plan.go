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

const planUsage = "usage: gptlab plan FILE.csv [--algo NAME] [--out SOLUTION.csv]"

// defaultPlanAlgo is the best planner available: the search if it is
// registered, else greedy-by-size.
func defaultPlanAlgo() string {
	if _, err := planner.Lookup("search"); err == nil {
		return "search"
	}
	return "greedy-by-size"
}

// planArgs parses the command line; flags may come before or after FILE.
func planArgs(args []string) (file, algo, out string, err error) {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&algo, "algo", defaultPlanAlgo(), "planner to use")
	fs.StringVar(&out, "out", "", "write the solution CSV here")
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", "", "", usageError("plan: %v (%s)", err, planUsage)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	switch len(files) {
	case 0:
		return "", "", "", usageError("plan: no input file (%s)", planUsage)
	case 1:
		return files[0], algo, out, nil
	}
	return "", "", "", usageError("plan: one input file, got %d: %q (%s)", len(files), files, planUsage)
}

func runPlan(args []string, stdout, stderr io.Writer) error {
	file, algoName, out, err := planArgs(args)
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
	t0 := time.Now()
	pl, err := algo.Place(ctx, p)
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
	return nil
}
