package reports

import (
	"encoding/csv"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Formats are the names accepted by Render.
var Formats = []string{"table", "markdown", "json", "csv"}

// Render writes the report in one of Formats; "table" fits the width of the
// terminal w is, or Width when w is not a terminal.
func (r *Report) Render(w io.Writer, format string) error {
	switch format {
	case "table":
		return r.WriteTextWidth(w, TerminalWidth(w))
	case "markdown":
		return r.WriteMarkdown(w)
	case "json":
		return r.WriteJSON(w)
	case "csv":
		return r.WriteCSV(w)
	}
	return fmt.Errorf("unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// WriteText writes the report for a terminal of Width columns.
func (r *Report) WriteText(w io.Writer) error { return r.WriteTextWidth(w, Width) }

// WriteTextWidth writes the report as text in which no line is wider than
// width columns: tables drawn by tablewriter, the reports it holds first.
func (r *Report) WriteTextWidth(w io.Writer, width int) error { return r.writeText(w, width, true) }

// writeText writes the report as text; the outermost report (top) also
// says where it was measured: the reports it holds were measured there too.
func (r *Report) writeText(w io.Writer, width int, top bool) error {
	for _, sub := range r.Reports {
		if err := sub.writeText(w, width, false); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	writeWrapped(w, fmt.Sprintf("%s — %s", r.Lab, r.Title), width, 2)
	if r.Config.Len() > 0 {
		writeWrapped(w, "config: "+r.configLine(), width, 8)
	}
	if top && r.Env.CPU != "" {
		writeWrapped(w, "env: "+r.Env.summary()+"; "+r.Env.buildLine(), width, 5)
		if r.Env.Kernels.Len() > 0 {
			writeWrapped(w, "kernels: "+r.Env.kernelLine(), width, 9)
		}
	}
	for _, t := range r.sections() {
		fmt.Fprintln(w)
		if err := writeTextTable(w, t.format(true), width); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w)
		writeWrapped(w, n, width, 0)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.verdict())
	return nil
}

// WriteMarkdown writes the report as a markdown document, the reports it
// holds first.
func (r *Report) WriteMarkdown(w io.Writer) error {
	for _, sub := range r.Reports {
		if err := sub.WriteMarkdown(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "# %s — %s\n\n", r.Lab, r.Title)
	if r.Config.Len() > 0 {
		fmt.Fprintf(w, "config: `%s`  \n", r.configLine())
	}
	fmt.Fprintf(w, "env: %s %s, %s, %d cores, %s, %s", r.Env.Go, r.Env.platform(), r.Env.CPU, r.Env.Cores, r.Env.buildLine(), r.Env.Time)
	if r.Env.Kernels.Len() > 0 {
		fmt.Fprintf(w, "; kernels: %s", r.Env.kernelLine())
	}
	fmt.Fprintln(w)
	for _, t := range r.sections() {
		f := t.format(true)
		fmt.Fprintf(w, "\n## %s\n\n", f.title)
		if len(f.consts) > 0 {
			fmt.Fprintf(w, "In every row: %s\n\n", strings.Join(f.consts, "; "))
		}
		align := make([]tw.Align, len(f.headers))
		headers := make([]any, len(f.headers))
		for j, h := range f.headers {
			headers[j] = h
			align[j] = tw.AlignLeft
			if f.numeric[j] {
				align[j] = tw.AlignRight
			}
		}
		tb := tablewriter.NewTable(w,
			tablewriter.WithRenderer(renderer.NewMarkdown()),
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithHeaderAutoWrap(tw.WrapNone),
			tablewriter.WithRowAutoWrap(tw.WrapNone),
			tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		)
		tb.Header(headers...)
		for _, row := range f.cells {
			if err := tb.Append(row); err != nil {
				return fmt.Errorf("table %q: %w", f.title, err)
			}
		}
		if err := tb.Render(); err != nil {
			return fmt.Errorf("table %q: %w", f.title, err)
		}
		for i, n := range f.notes {
			fmt.Fprintf(w, "\n%d. %s\n", i+1, n)
		}
	}
	for _, f := range r.Figures {
		if strings.HasSuffix(f, ".svg") {
			fmt.Fprintf(w, "\n![%s](%s)\n", strings.TrimSuffix(f, ".svg"), f)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	fmt.Fprintf(w, "\n**%s**\n", r.verdict())
	return nil
}

// WriteCSV writes every table, metric and check as CSV records of the form
// section,row,column,value,unit — one long table a spreadsheet can pivot,
// with exact values (bytes as counts, durations in seconds). The reports
// it holds come first, their sections prefixed with their lab's name.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"section", "row", "column", "value", "unit"})
	r.writeCSV(cw, "")
	cw.Flush()
	return cw.Error()
}

func (r *Report) writeCSV(cw *csv.Writer, prefix string) {
	for _, sub := range r.Reports {
		sub.writeCSV(cw, prefix+sub.Lab+": ")
	}
	for _, k := range r.Metrics.Keys() {
		v, _ := r.Metrics.Get(k)
		cw.Write([]string{prefix + "metrics", k, "value", csvValue(v), ""})
	}
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			key := csvValue(t.Columns[0].Raw(row[0]))
			for j, v := range row {
				c := t.Columns[j]
				cw.Write([]string{prefix + t.Title, key, c.Name, csvValue(c.Raw(v)), c.UnitName()})
			}
		}
	}
	for _, c := range r.Checks {
		cw.Write([]string{prefix + "checks", c.Name, "pass", Cell(c.Pass), ""})
		cw.Write([]string{prefix + "checks", c.Name, "verdict", string(c.Outcome()), ""})
	}
}

// csvValue writes an exact value: floats in their shortest exact form.
func csvValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return Cell(v)
}

// sections are the tables to print: the lab's own, then metrics and checks.
func (r *Report) sections() []*Table {
	out := append([]*Table(nil), r.Tables...)
	if r.Metrics.Len() > 0 {
		m := &Table{Title: "Metrics", Columns: []Column{Text("metric"), Int("value")}}
		for _, k := range r.Metrics.Keys() {
			v, _ := r.Metrics.Get(k)
			m.Rows = append(m.Rows, []any{k, metricCell(k, v)})
		}
		out = append(out, m)
	}
	if len(r.Checks) > 0 {
		c := &Table{Title: "Checks", Columns: []Column{Text("check"), Text("result"), Text("detail")}}
		for _, ch := range r.Checks {
			res := "PASS"
			var detail any = brief(ch.Detail)
			switch ch.Outcome() {
			case Fail:
				res, detail = "FAIL", ch.Detail
			case Inconclusive:
				res, detail = "INCONCLUSIVE", ch.Detail
			}
			c.Rows = append(c.Rows, []any{ch.Name, res, detail})
		}
		out = append(out, c)
	}
	return out
}

// metricCell formats a metric by its unit suffix: bytes as B/KiB/MiB/GiB
// beside the exact count, anything else with Cell.
func metricCell(name string, v any) string {
	if strings.HasSuffix(name, "_bytes") {
		if n, ok := number(v); ok && (n >= 1024 || n <= -1024) {
			return fmt.Sprintf("%s (%s)", FormatBytes(n), Cell(v))
		}
	}
	return Cell(v)
}

func (r *Report) configLine() string {
	parts := make([]string, 0, r.Config.Len())
	for _, k := range r.Config.Keys() {
		v, _ := r.Config.Get(k)
		parts = append(parts, fmt.Sprintf("%s=%s", k, configCell(v)))
	}
	return strings.Join(parts, " ")
}

// configCell shows a setting as --set takes it: numbers exactly, a list
// as its items so (0.5,2,8, not 0.5000,2,8).
func configCell(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case string:
		return x
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = configCell(rv.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return Cell(v)
}

func (r *Report) verdict() string {
	failed, unsure := 0, r.Inconclusive()
	for _, c := range r.Checks {
		if c.Outcome() == Fail {
			failed++
		}
	}
	switch {
	case failed > 0 && unsure > 0:
		return fmt.Sprintf("%d of %s FAILED, %d INCONCLUSIVE", failed, Count(len(r.Checks), "check"), unsure)
	case failed > 0:
		return fmt.Sprintf("%d of %s FAILED", failed, Count(len(r.Checks), "check"))
	case unsure > 0:
		return fmt.Sprintf("%d of %s INCONCLUSIVE (timed: the noise hid the target), the rest passed",
			unsure, Count(len(r.Checks), "check"))
	case len(r.Checks) == 1:
		return "the check passed"
	}
	return fmt.Sprintf("all %d checks passed", len(r.Checks))
}

// Count is n and the noun, in the plural unless n is 1: "1 rank",
// "3 buffers".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
