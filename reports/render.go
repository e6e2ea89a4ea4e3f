package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Formats are the names accepted by Render.
var Formats = []string{"table", "markdown", "json", "csv"}

// Render writes the report in one of Formats.
func (r *Report) Render(w io.Writer, format string) error {
	switch format {
	case "table":
		return r.WriteText(w)
	case "markdown":
		return r.WriteMarkdown(w)
	case "json":
		return r.WriteJSON(w)
	case "csv":
		return r.WriteCSV(w)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// WriteText writes the report for a terminal: tables drawn by tablewriter.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s — %s\n", r.Lab, r.Title)
	if r.Config.Len() > 0 {
		fmt.Fprintf(w, "config: %s\n", r.configLine())
	}
	for _, t := range r.sections() {
		fmt.Fprintf(w, "\n%s\n", t.Title)
		tb := tablewriter.NewTable(w,
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithHeaderAlignment(tw.AlignCenter),
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: t.alignments()}),
		)
		if err := fill(tb, t); err != nil {
			return err
		}
	}
	r.writeNotes(w, "")
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.verdict())
	return nil
}

// WriteMarkdown writes the report as a markdown document.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "# %s — %s\n\n", r.Lab, r.Title)
	if r.Config.Len() > 0 {
		fmt.Fprintf(w, "config: `%s`  \n", r.configLine())
	}
	fmt.Fprintf(w, "env: %s %s/%s, %s, %d cores, commit %s, %s\n", r.Env.Go, r.Env.OS, r.Env.Arch, r.Env.CPU, r.Env.Cores, r.Env.Commit, r.Env.Time)
	for _, t := range r.sections() {
		fmt.Fprintf(w, "\n## %s\n\n", t.Title)
		tb := tablewriter.NewTable(w,
			tablewriter.WithRenderer(renderer.NewMarkdown()),
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: t.alignments()}),
		)
		if err := fill(tb, t); err != nil {
			return err
		}
	}
	for _, f := range r.Figures {
		if strings.HasSuffix(f, ".svg") {
			fmt.Fprintf(w, "\n![%s](%s)\n", strings.TrimSuffix(f, ".svg"), f)
		}
	}
	r.writeNotes(w, "\n")
	fmt.Fprintf(w, "\n**%s**\n", r.verdict())
	return nil
}

// WriteCSV writes every table, metric and check as CSV records of the form
// section,row,column,value — one long table a spreadsheet can pivot.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"section", "row", "column", "value"})
	for _, k := range r.Metrics.Keys() {
		v, _ := r.Metrics.Get(k)
		cw.Write([]string{"metrics", k, "value", Cell(v)})
	}
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			for j, c := range row {
				col := fmt.Sprint(j)
				if j < len(t.Columns) {
					col = t.Columns[j]
				}
				cw.Write([]string{t.Title, row[0], col, c})
			}
		}
	}
	for _, c := range r.Checks {
		cw.Write([]string{"checks", c.Name, "pass", Cell(c.Pass)})
	}
	cw.Flush()
	return cw.Error()
}

// sections are the tables to print: the lab's own, then metrics and checks.
func (r *Report) sections() []Table {
	out := make([]Table, 0, len(r.Tables)+2)
	for _, t := range r.Tables {
		out = append(out, *t)
	}
	if r.Metrics.Len() > 0 {
		m := Table{Title: "Metrics", Columns: []string{"metric", "value"}}
		for _, k := range r.Metrics.Keys() {
			v, _ := r.Metrics.Get(k)
			m.Rows = append(m.Rows, []string{k, Cell(v)})
		}
		out = append(out, m)
	}
	if len(r.Checks) > 0 {
		c := Table{Title: "Checks", Columns: []string{"check", "result", "detail"}}
		for _, ch := range r.Checks {
			res := "PASS"
			if !ch.Pass {
				res = "FAIL"
			}
			c.Rows = append(c.Rows, []string{ch.Name, res, ch.Detail})
		}
		out = append(out, c)
	}
	return out
}

// alignments right-aligns the columns that hold only numbers and
// left-aligns the rest.
func (t Table) alignments() []tw.Align {
	out := make([]tw.Align, len(t.Columns))
	for j := range t.Columns {
		out[j] = tw.AlignRight
		for _, row := range t.Rows {
			if j < len(row) && row[j] != "" && !numeric(row[j]) {
				out[j] = tw.AlignLeft
				break
			}
		}
	}
	return out
}

func numeric(s string) bool {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "%"), "x")
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func fill(tb *tablewriter.Table, t Table) error {
	header := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		header[i] = c
	}
	tb.Header(header...)
	for _, row := range t.Rows {
		if err := tb.Append(row); err != nil {
			return fmt.Errorf("table %q: %w", t.Title, err)
		}
	}
	return tb.Render()
}

func (r *Report) configLine() string {
	parts := make([]string, 0, r.Config.Len())
	for _, k := range r.Config.Keys() {
		v, _ := r.Config.Get(k)
		parts = append(parts, fmt.Sprintf("%s=%s", k, Cell(v)))
	}
	return strings.Join(parts, " ")
}

func (r *Report) writeNotes(w io.Writer, sep string) {
	if len(r.Notes) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%s%s\n", n, sep)
	}
}

func (r *Report) verdict() string {
	failed := 0
	for _, c := range r.Checks {
		if !c.Pass {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Sprintf("%d of %d checks FAILED", failed, len(r.Checks))
	}
	return fmt.Sprintf("all %d checks passed", len(r.Checks))
}
