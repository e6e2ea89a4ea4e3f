package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// This file is gptlab report: a saved report.json rendered again, as text,
// markdown or HTML, without running anything.

func init() {
	RegisterCommand(&Command{
		Name:  "report",
		Usage: "DIR [--format F]",
		Short: "print a saved report (DIR/report.json, as --out wrote it) again, running nothing",
		Long: "DIR is a directory that run or exit-gate --out wrote. --format html writes the page that " +
			"--out saves as report.html (figures inline from DIR). The exit status is the report's: 1 if a " +
			"check in it failed.",
		Setup: func(fs *flag.FlagSet) Runner {
			format := fs.String("format", "table", "output format `F`: table, markdown, html, json or csv")
			return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
				if len(args) != 1 {
					return lab.Usagef("report: name one directory (an --out DIR of run or exit-gate)")
				}
				return showReport(args[0], *format, stdout)
			}
		},
	})
}

// showReport renders dir's report.json in format.
func showReport(dir, format string, stdout io.Writer) error {
	if format != "html" && !slices.Contains(reports.Formats, format) {
		return lab.Usagef("report: --format %q: want one of %s, html", format, strings.Join(reports.Formats, ", "))
	}
	r, err := loadReport(dir)
	if err != nil {
		return err
	}
	if format == "html" {
		err = r.WriteHTML(stdout, dir, htmlSections(r))
	} else {
		err = r.Render(stdout, format)
	}
	if err != nil {
		return err
	}
	if r.Failed() {
		return errChecksFailed
	}
	return nil
}

// loadReport reads dir/report.json; what is wrong is a usage error.
func loadReport(dir string) (*reports.Report, error) {
	path := filepath.Join(dir, "report.json")
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
			return nil, lab.Usagef("report %s: not a directory", dir)
		}
		return nil, lab.Usagef("report %s: no report.json in it (write one with --out)", dir)
	case err != nil:
		return nil, lab.Usagef("report %s: %v", path, pathCause(err))
	}
	r, err := reports.ReadReport(data)
	if err != nil {
		return nil, lab.Usagef("report %s: %v", path, err)
	}
	return r, nil
}

// htmlSections groups an exit gate's labs by artifact for its page, with
// each artifact's verdict; any other report has none.
func htmlSections(r *reports.Report) []reports.HTMLSection {
	if r.Lab != "exit-gate" {
		return nil
	}
	ran, failed := map[string]*reports.Report{}, map[string]bool{}
	for _, sub := range r.Reports {
		ran[sub.Lab] = sub
	}
	for _, c := range r.Checks {
		if name, ok := strings.CutSuffix(c.Name, ": lab ran"); ok && c.Outcome() == reports.Fail {
			failed[name] = true
		}
	}
	quick, _ := r.Config.Get("quick")
	seed, _ := r.Config.Float("seed")
	rows := artifactRows(ran, failed, quick == true, int64(seed))
	var out []reports.HTMLSection
	for i, a := range artifacts {
		out = append(out, reports.HTMLSection{Title: a.name, Verdict: rows[i].verdict, Labs: a.labs})
	}
	return out
}
