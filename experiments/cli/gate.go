package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// This file is the exit gate: every built lab, each report printed (or
// saved) as it finishes, and a summary holding them all.

func exitGateCommand(fs *flag.FlagSet) Runner {
	rf := addRunFlags(fs, false)
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("exit-gate", args); err != nil {
			return err
		}
		if err := checkReportFlags(*rf.format, *rf.out); err != nil {
			return err
		}
		return exitGate(ctx, rf, stdout, stderr)
	}
}

// exitGate runs every built lab and summarises their checks. Text and
// markdown print each lab's report as it finishes, then the summary; JSON
// and CSV print the summary holding every lab's full report.
func exitGate(ctx context.Context, rf *runFlags, stdout, stderr io.Writer) error {
	format, out := *rf.format, *rf.out
	stream := format == "table" || format == "markdown"
	var saved []string
	gate, err := runGate(ctx, rf.quick, rf.options(stderr), func(r *reports.Report) error {
		if stream {
			if err := r.Render(stdout, format); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		if out != "" {
			if err := writeReportDir(r, filepath.Join(out, r.Lab)); err != nil {
				return err
			}
			saved = append(saved, r.Lab)
		}
		return nil
	})
	var stopped *gateStopped
	if errors.As(err, &stopped) {
		if len(saved) > 0 {
			return lab.Interruptedf("interrupted during lab %s; the reports of %s are saved under %s", stopped.lab, strings.Join(saved, ", "), out)
		}
		return lab.Interruptedf("interrupted during lab %s; %s", stopped.lab, nothingSaved(out, "no lab had finished"))
	}
	if err != nil {
		return err
	}
	if ctx.Err() != nil { // after the last lab, before the summary
		if len(saved) > 0 {
			return lab.Interruptedf("interrupted after the last lab; the reports of %s are saved under %s, the summary is not", strings.Join(saved, ", "), out)
		}
		return lab.Interruptedf("interrupted after the last lab; %s", nothingSaved(out, "the summary is written at the end"))
	}
	if out != "" {
		if err := writeReportDir(gate, out); err != nil {
			return err
		}
	}
	shown := gate
	if stream {
		summary := *gate
		summary.Reports = nil // printed already
		shown = &summary
	}
	return emitStrict(shown, format, "", stdout, rf.strict)
}

// gateStopped: the exit gate was interrupted while lab ran.
type gateStopped struct{ lab string }

func (e *gateStopped) Error() string        { return "interrupted during lab " + e.lab }
func (e *gateStopped) Is(target error) bool { return target == context.Canceled }

// runGate runs every built lab (shrunk by its quick function when quick is
// set) and returns the gate's report: a table of the labs, every lab's
// checks as its own, and every lab's full report in Reports. done is
// called with each lab's report as it finishes.
func runGate(ctx context.Context, quick bool, opt lab.Options, done func(*reports.Report) error) (*reports.Report, error) {
	start := time.Now()
	gate := reports.New("exit-gate", "The chapter's exit gate: every built lab, every check")
	ran, failed := map[string]*reports.Report{}, map[string]bool{}
	summary := gate.AddTable("Labs", reports.Text("lab"), reports.Int("checks"), reports.Int("failed"),
		reports.Int("inconclusive"), reports.Duration("time", time.Second, 1))
	var notBuilt []string
	for _, l := range Labs() {
		if !l.Built {
			notBuilt = append(notBuilt, l.Name)
			continue
		}
		fmt.Fprintf(opt.Log, "exit-gate: running %s\n", l.Name)
		t0 := time.Now()
		cfg, err := l.Config(quick, nil)
		var r *reports.Report
		if err == nil {
			r, err = runLab(ctx, l, cfg, opt)
		}
		took := time.Since(t0)
		if ctx.Err() != nil {
			return nil, &gateStopped{lab: l.Name}
		}
		if err != nil {
			gate.Check(l.Name+": lab ran", false, "%s", oneLine(err))
			failed[l.Name] = true
			summary.Row(l.Name, 0, 1, 0, took)
			continue
		}
		if quick {
			r.Config.Set("quick", true)
		}
		for _, c := range r.Checks {
			c.Name = l.Name + ": " + c.Name
			gate.Checks = append(gate.Checks, c)
		}
		summary.Row(l.Name, len(r.Checks), len(r.Checks)-r.Inconclusive()-passed(r), r.Inconclusive(), took)
		ran[l.Name] = r
		gate.Reports = append(gate.Reports, r)
		if err := done(r); err != nil {
			return nil, err
		}
	}
	addArtifactTable(gate, artifactRows(ran, failed, quick, opt.Seed))
	if len(notBuilt) > 0 {
		gate.Note("Not built yet: %s.", strings.Join(notBuilt, ", "))
	}
	if n := gate.Inconclusive(); n > 0 {
		gate.Note("%s INCONCLUSIVE: timed, their rounds' 95%% interval still straddled the target when the time budget "+
			"ran out (the machine was too noisy to tell). They do not fail the gate; --strict makes them fail it.", reports.Count(n, "check"))
	}
	gate.Config.Set("seed", opt.Seed)
	gate.Config.Set("quick", quick)
	gate.Env = reports.CurrentEnv()
	gate.Env.Wall = time.Since(start).Seconds()
	return gate, nil
}

// passed counts a report's passed checks.
func passed(r *reports.Report) int {
	n := 0
	for _, c := range r.Checks {
		if c.Outcome() == reports.Pass {
			n++
		}
	}
	return n
}
