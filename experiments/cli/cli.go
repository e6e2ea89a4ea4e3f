package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// This file holds the commands list, help, run and exit-gate, and what
// the commands share: the report flags, checking --out before any work,
// writing a report directory, running a lab so that Ctrl-C stops it.

func init() {
	RegisterCommand(&Command{
		Name: "list", Short: "every lab: name and one line",
		Setup: func(fs *flag.FlagSet) Runner {
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				if err := noArgs("list", args); err != nil {
					return err
				}
				return list(stdout)
			}
		},
	})
	RegisterCommand(&Command{
		Name: "help", Usage: "[LAB|COMMAND]", Short: "a lab's settings, or a command's usage and flags",
		Setup: func(fs *flag.FlagSet) Runner {
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				return writeHelp(stdout, args)
			}
		},
	})
	RegisterCommand(&Command{
		Name:  "run",
		Usage: "LAB [--set key=value ...] [--seed N] [--quick] [--strict] [--format F] [--out DIR]",
		Short: "run one lab and print its report",
		Long: "--quick shrinks the lab (its own choice of smaller settings) to well under a minute on 2 cores; " +
			"--set values are applied after it and win. The report's config shows what ran. " +
			"gptlab list names the labs; gptlab help LAB lists a lab's settings.",
		Setup: runLabCommand,
	})
	RegisterCommand(&Command{
		Name:  "exit-gate",
		Usage: "[--quick] [--seed N] [--strict] [--format F] [--out DIR]",
		Short: "every built lab, every check, and a summary opening with the chapter's five artifacts",
		Long: "Text and markdown print each lab's report as it finishes, then the summary: the five artifacts " +
			"(verdict from their labs' checks, the figures that make the case, the command that reproduces each " +
			"alone), the labs, every check. JSON and CSV print the summary holding every lab's full report. " +
			"A timed check is decided over rounds: PASS or FAIL when its 95% interval lies on one side of its " +
			"target, INCONCLUSIVE when the time budget ran out first (exit 0 unless --strict). --out DIR writes " +
			"each lab's report under DIR/LAB and the summary in DIR.",
		Setup: exitGateCommand,
	})
}

// flagGiven reports whether the flag was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// noArgs refuses positional arguments.
func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return lab.Usagef("%s: unexpected argument %q", name, args[0])
	}
	return nil
}

// labLine is a lab's one line as gptlab list shows it.
func labLine(l *lab.Lab) string {
	if !l.Built {
		return l.Short + " (not built yet)"
	}
	return l.Short
}

func list(w io.Writer) error {
	for _, l := range Labs() {
		for i, line := range reports.Wrap(labLine(l), reports.Width-17) {
			name := ""
			if i == 0 {
				name = l.Name
			}
			fmt.Fprintf(w, "%-16s %s\n", name, line)
		}
	}
	return nil
}

// runFlags are the flags of run and exit-gate.
type runFlags struct {
	sets   lab.SetFlag
	seed   *int64
	quick  bool
	strict bool
	format *string
	out    *string
}

func addRunFlags(fs *flag.FlagSet, withSet bool) *runFlags {
	rf := &runFlags{}
	if withSet {
		fs.Var(&rf.sets, "set", "`key=value` override of a lab setting (repeatable; gptlab help LAB lists them)")
	}
	rf.seed = seedFlag(fs, "seed `N` of every random choice")
	fs.BoolVar(&rf.quick, "quick", false, "shrink the lab to well under a minute on 2 cores")
	fs.BoolVar(&rf.strict, "strict", false, "an inconclusive timed check fails (exit 1), as a failed one does")
	rf.format, rf.out = reportFlags(fs, "report.md, report.json and the figures")
	return rf
}

func (rf *runFlags) options(stderr io.Writer) lab.Options {
	return lab.Options{Seed: *rf.seed, Log: logFor(*rf.format, stderr), Out: *rf.out}
}

// seedFlag is --seed.
func seedFlag(fs *flag.FlagSet, help string) *int64 { return fs.Int64("seed", 1, help) }

// reportFlags are --format and --out DIR, whose directory receives what.
func reportFlags(fs *flag.FlagSet, what string) (format, out *string) {
	return fs.String("format", "table", "output format `F`: table, markdown, json or csv"),
		fs.String("out", "", "directory `DIR` for "+what+" (created if need be)")
}

// checkReportFlags checks --format and that --out can be written, before
// any work is done.
func checkReportFlags(format, out string) error {
	if !slices.Contains(reports.Formats, format) {
		return lab.Usagef("--format %q: want one of %s", format, strings.Join(reports.Formats, ", "))
	}
	if out != "" {
		return checkOutDir(out)
	}
	return nil
}

// logFor is where progress goes: stderr, or nowhere under json and csv.
func logFor(format string, stderr io.Writer) io.Writer {
	if format == "json" || format == "csv" {
		return io.Discard
	}
	return stderr
}

func runLabCommand(fs *flag.FlagSet) Runner {
	rf := addRunFlags(fs, true)
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if len(args) == 0 {
			return lab.Usagef("run: name a lab (gptlab list shows them)")
		}
		if len(args) > 1 {
			return lab.Usagef("run %s: unexpected argument %q", args[0], args[1])
		}
		l, err := Find(args[0])
		if err != nil {
			return lab.Usagef("run: %v", err)
		}
		cfg, err := l.Config(rf.quick, rf.sets)
		if err != nil {
			return err
		}
		if err := checkReportFlags(*rf.format, *rf.out); err != nil {
			return err
		}
		r, err := runLab(ctx, l, cfg, rf.options(stderr))
		if ctx.Err() != nil { // also when the lab finished in time: an interrupt means 130
			return lab.Interruptedf("interrupted during lab %s; %s", l.Name, nothingSaved(*rf.out, "the report is written when the lab finishes"))
		}
		if err != nil {
			return err
		}
		r.Config.Set("quick", rf.quick)
		return emitStrict(r, *rf.format, *rf.out, stdout, rf.strict)
	}
}

// nothingSaved says why nothing was saved: no --out, or why not yet.
func nothingSaved(out, why string) string {
	if out == "" {
		return "nothing saved: no --out given"
	}
	return "nothing saved in " + out + ": " + why
}

// runLab runs a lab so that an interrupt returns promptly: a lab that does
// not stop on its own within half the grace is left behind (it writes
// nothing; its report is written by the caller).
func runLab(ctx context.Context, l *lab.Lab, cfg any, opt lab.Options) (*reports.Report, error) {
	type result struct {
		r   *reports.Report
		err error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := l.Run(ctx, cfg, opt)
		ch <- result{r, err}
	}()
	select {
	case res := <-ch:
		return res.r, res.err
	case <-ctx.Done():
		select {
		case res := <-ch:
			return res.r, res.err
		case <-time.After(interruptGrace / 2):
			return nil, ctx.Err()
		}
	}
}

// emit stamps where the report was measured (keeping the wall time a lab
// measured), prints it (and writes it under out), and turns a failed check
// into errChecksFailed (exit 1).
func emit(r *reports.Report, format, out string, stdout io.Writer) error {
	return emitStrict(r, format, out, stdout, false)
}

// emitStrict is emit where, with strict, an inconclusive timed check
// fails too (--strict).
func emitStrict(r *reports.Report, format, out string, stdout io.Writer, strict bool) error {
	wall := r.Env.Wall
	r.Env = reports.CurrentEnv()
	r.Env.Wall = wall
	if !r.Silent {
		if err := renderReport(r, format, out, stdout); err != nil {
			return err
		}
	}
	switch r.Outcome() {
	case reports.Fail:
		return errChecksFailed
	case reports.Inconclusive:
		if strict {
			return errChecksFailed
		}
	}
	return nil
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

// writeReportDir writes report.md, report.json, report.html (one page,
// the figures inline) and the figures into dir,
// each atomically; a failure names the path (exit 2).
func writeReportDir(r *reports.Report, dir string) error {
	if err := checkOutFiles(dir, append(reportFiles, r.FigureFiles()...)); err != nil {
		return err // before anything is written
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return lab.Usagef("--out %s: %v", dir, pathCause(err))
	}
	if err := r.WriteFigures(dir); err != nil {
		return lab.Usagef("--out %s: %v", dir, err)
	}
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.md", r.WriteMarkdown}, {"report.json", r.WriteJSON},
		{"report.html", func(w io.Writer) error { return r.WriteHTML(w, dir, htmlSections(r)) }}} {
		if err := reports.WriteFileAtomic(filepath.Join(dir, f.name), reports.WriterFunc(f.write)); err != nil {
			return lab.Usagef("--out %s: %v", dir, err)
		}
	}
	return nil
}

// checkOutDir checks that dir is, or can be made, a directory gptlab can
// write in, without creating anything: the deepest part of the path that
// exists must be a directory where a file can be created.
// reportFiles are the files every report writes into --out.
var reportFiles = []string{"report.md", "report.json", "report.html"}

// checkOutFiles refuses an --out directory where one of the files a
// report writes cannot go: a directory (or anything but a file) in its
// place.
func checkOutFiles(dir string, names []string) error {
	for _, name := range names {
		st, err := os.Lstat(filepath.Join(dir, name))
		if err == nil && !st.Mode().IsRegular() {
			return lab.Usagef("--out %s: %s is in the way of the report's %s (not a file)", dir, filepath.Join(dir, name), name)
		}
	}
	return nil
}

func checkOutDir(dir string) error {
	if err := checkOutFiles(dir, reportFiles); err != nil {
		return err
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		switch {
		case err == nil && !st.IsDir():
			if d == filepath.Clean(dir) {
				return lab.Usagef("--out %s: not a directory", dir)
			}
			return lab.Usagef("--out %s: %s is a file, not a directory", dir, d)
		case err == nil:
			return probeWrite("--out "+dir, d)
		case !errors.Is(err, fs.ErrNotExist):
			return lab.Usagef("--out %s: %v", dir, pathCause(err))
		case filepath.Dir(d) == d:
			return lab.Usagef("--out %s: no part of the path exists", dir)
		}
	}
}

// checkOutFile checks that a file can be written at path: its directory
// exists and is writable, and path is not a directory.
func checkOutFile(flagName, path string) error {
	what := flagName + " " + path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return lab.Usagef("%s: is a directory, want a file name", what)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return lab.Usagef("%s: directory %s: %v", what, dir, pathCause(err))
	}
	if !st.IsDir() {
		return lab.Usagef("%s: %s is not a directory", what, dir)
	}
	return probeWrite(what, dir)
}

// probeWrite creates and removes a file in dir.
func probeWrite(what, dir string) error {
	f, err := os.CreateTemp(dir, ".gptlab-probe-*")
	if err != nil {
		return lab.Usagef("%s: cannot write in %s: %v", what, dir, pathCause(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// pathCause is the reason of a file error without its path (which may be
// a temporary file the user never named): "permission denied".
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
