package experiments

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"gptlab/reports"
)

// commands holds the subcommands other than list, run and exit-gate; each
// registers itself from the file that implements it.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{}

const usage = `gptlab runs the labs of "Memory Planning, Precision, and Distributed Execution".

usage:
  gptlab list                                   every lab: name and one line
  gptlab run LAB [--set key=value ...] [--seed N] [--quick] [--format table|markdown|json|csv] [--out DIR]
  gptlab exit-gate [--quick] [--seed N] [--format ...] [--out DIR]
  gptlab plan FILE.csv [--algo NAME] [--out SOLUTION.csv]
  gptlab gpt train|eval|sample|grads ...
  gptlab bench train [--set ...] [--steps K] [--format json]
  gptlab help [LAB]                             a lab's settings and their defaults

exit status: 0 all checks held, 1 a check failed, 2 bad usage or bad input.
`

// Main runs the gptlab command line and returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errChecksFailed):
		return 1
	case errors.Is(err, ErrUsage), errors.Is(err, ErrNotBuilt):
		fmt.Fprintln(stderr, "gptlab:", oneLine(err))
		return 2
	default:
		fmt.Fprintln(stderr, "gptlab:", oneLine(err))
		return 1
	}
}

// errChecksFailed: the report was printed and at least one check failed.
var errChecksFailed = errors.New("a check failed")

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usageError("no command given")
	}
	switch args[0] {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			return labHelp(args[1], stdout)
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "list":
		return list(stdout)
	case "run":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return usageError("run: name a lab (gptlab list shows them)")
		}
		return runCommand(args[1], args[2:], stdout, stderr)
	case "exit-gate":
		return exitGate(args[1:], stdout, stderr)
	}
	if cmd, ok := commands[args[0]]; ok {
		return cmd(args[1:], stdout, stderr)
	}
	return usageError("unknown command %q (gptlab help lists them)", args[0])
}

func list(w io.Writer) error {
	for _, l := range Labs() {
		short := l.Short
		if !l.Built {
			short += " (not built yet)"
		}
		fmt.Fprintf(w, "%-16s %s\n", l.Name, short)
	}
	return nil
}

func labHelp(name string, w io.Writer) error {
	l, err := Find(name)
	if err != nil {
		return usageError("%v", err)
	}
	fmt.Fprintf(w, "%s: %s\n", l.Name, l.Short)
	if !l.Built {
		fmt.Fprintln(w, "not built yet")
		return nil
	}
	fmt.Fprintln(w, "settings (--set key=value):")
	for _, f := range configFields(l.config()) {
		fmt.Fprintf(w, "  %-16s %-10v %s\n", f.key, reports.Cell(f.v.Interface()), f.help)
	}
	return nil
}

// runFlags are the flags shared by run and exit-gate.
type runFlags struct {
	sets   setFlag
	seed   int64
	quick  bool
	format string
	out    string
}

func parseRunFlags(name string, args []string, withSet bool) (*runFlags, error) {
	rf := &runFlags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if withSet {
		fs.Var(&rf.sets, "set", "key=value override of a lab setting (repeatable)")
	}
	fs.Int64Var(&rf.seed, "seed", 1, "seed of every random choice")
	fs.BoolVar(&rf.quick, "quick", false, "shrink the lab to well under a minute")
	fs.StringVar(&rf.format, "format", "table", "table, markdown, json or csv")
	fs.StringVar(&rf.out, "out", "", "directory for report.md, report.json and figures")
	if err := fs.Parse(args); err != nil {
		return nil, usageError("%s: %v", name, err)
	}
	if fs.NArg() > 0 {
		return nil, usageError("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if !slices.Contains(reports.Formats, rf.format) {
		return nil, usageError("--format %q: want one of %s", rf.format, strings.Join(reports.Formats, ", "))
	}
	return rf, nil
}

func (rf *runFlags) options(stderr io.Writer) Options {
	log := stderr
	if rf.format == "json" || rf.format == "csv" {
		log = io.Discard
	}
	return Options{Seed: rf.seed, Log: log, Out: rf.out}
}

func runCommand(name string, args []string, stdout, stderr io.Writer) error {
	l, err := Find(name)
	if err != nil {
		return usageError("%v", err)
	}
	rf, err := parseRunFlags("run "+name, args, true)
	if err != nil {
		return err
	}
	cfg, err := l.Config(rf.quick, rf.sets)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := RunLab(ctx, l, cfg, rf.options(stderr))
	if err != nil {
		return err
	}
	r.Config.Set("quick", rf.quick)
	return emit(r, rf.format, rf.out, stdout)
}

// emit stamps where the report was measured, prints it (and writes it
// under out), and turns a failed check into errChecksFailed (exit 1).
func emit(r *reports.Report, format, out string, stdout io.Writer) error {
	r.Env = reports.CurrentEnv()
	if err := renderReport(r, format, out, stdout); err != nil {
		return err
	}
	if r.Failed() {
		return errChecksFailed
	}
	return nil
}

// RunLab runs a built lab with a config (from Lab.Config; nil: the
// defaults) and fills in the report's config, which is the config after
// the lab resolved its defaults, and environment. A panic inside the lab
// (graph construction panics on shape errors) becomes an error.
func RunLab(ctx context.Context, l *Lab, cfg any, opt Options) (r *reports.Report, err error) {
	if !l.Built {
		return nil, fmt.Errorf("lab %q: %w", l.Name, ErrNotBuilt)
	}
	if cfg == nil {
		cfg = l.config()
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	defer func() {
		if p := recover(); p != nil {
			if os.Getenv("GPTLAB_TRACE") != "" {
				fmt.Fprintf(opt.Log, "%s\n", debug.Stack())
			}
			r, err = nil, fmt.Errorf("lab %s: internal error: %v (GPTLAB_TRACE=1 prints the stack)", l.Name, p)
		}
	}()
	r, err = l.run(ctx, cfg, opt)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	r.Lab = l.Name
	cv := configValues(cfg)
	cv.Set("seed", opt.Seed)
	r.Config = cv
	r.Env = reports.CurrentEnv()
	return r, nil
}

// renderReport prints r to stdout in format and, when out is not empty,
// writes report.md, report.json and the figures into out atomically.
func renderReport(r *reports.Report, format, out string, stdout io.Writer) error {
	if out != "" {
		if err := writeReportDir(r, out); err != nil {
			return err
		}
	}
	return r.Render(stdout, format)
}

func writeReportDir(r *reports.Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError("--out %s: %v", dir, err)
	}
	if err := r.WriteFigures(dir); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer) error{
		"report.md":   r.WriteMarkdown,
		"report.json": r.WriteJSON,
	} {
		if err := reports.WriteFileAtomic(filepath.Join(dir, name), reports.WriterFunc(write)); err != nil {
			return err
		}
	}
	return nil
}

// exitGate runs every built lab and summarises their checks. Text and
// markdown print each lab's report as it finishes, then the summary; JSON
// and CSV print the summary holding every lab's full report.
func exitGate(args []string, stdout, stderr io.Writer) error {
	rf, err := parseRunFlags("exit-gate", args, false)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stream := rf.format == "table" || rf.format == "markdown"
	gate, err := runGate(ctx, rf.quick, rf.options(stderr), func(r *reports.Report) error {
		if stream {
			if err := r.Render(stdout, rf.format); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		if rf.out != "" {
			return writeReportDir(r, filepath.Join(rf.out, r.Lab))
		}
		return nil
	})
	if err != nil {
		return err
	}
	gate.Config.Set("seed", rf.seed)
	gate.Config.Set("quick", rf.quick)
	if rf.out != "" {
		if err := writeReportDir(gate, rf.out); err != nil {
			return err
		}
	}
	shown := gate
	if stream {
		summary := *gate
		summary.Reports = nil // printed already
		shown = &summary
	}
	return emit(shown, rf.format, "", stdout)
}

// runGate runs every built lab (shrunk by its quick function when quick is
// set) and returns the gate's report: a table of the labs, every lab's
// checks as its own, and every lab's full report in Reports. done is
// called with each lab's report as it finishes.
func runGate(ctx context.Context, quick bool, opt Options, done func(*reports.Report) error) (*reports.Report, error) {
	gate := reports.New("exit-gate", "The chapter's exit gate: every built lab, every check")
	summary := gate.AddTable("Labs", reports.Text("lab"), reports.Int("checks"), reports.Int("failed"),
		reports.Duration("time", time.Second, 1))
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
			r, err = RunLab(ctx, l, cfg, opt)
		}
		took := time.Since(t0)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			gate.Check(l.Name+": lab ran", false, "%s", oneLine(err))
			summary.Row(l.Name, 0, 1, took)
			continue
		}
		if quick {
			r.Config.Set("quick", true)
		}
		failed := 0
		for _, c := range r.Checks {
			gate.Check(l.Name+": "+c.Name, c.Pass, "%s", c.Detail)
			if !c.Pass {
				failed++
			}
		}
		summary.Row(l.Name, len(r.Checks), failed, took)
		gate.Reports = append(gate.Reports, r)
		if err := done(r); err != nil {
			return nil, err
		}
	}
	if len(notBuilt) > 0 {
		gate.Note("Not built yet (each comes with its own issue): %s.", strings.Join(notBuilt, ", "))
	}
	return gate, nil
}
