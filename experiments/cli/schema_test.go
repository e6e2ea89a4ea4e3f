package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"gptlab/reports"
)

const reportSchemaPath = "../../schema/report.schema.json"

// reportSchema compiles schema/report.schema.json, formats asserted (the
// env's date-time).
func reportSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(reportSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", reportSchemaPath, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("report.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatalf("%s: %v", reportSchemaPath, err)
	}
	return s
}

// asPrinted is r as --format json prints it: stamped where it ran (emit),
// written by the report's own JSON writer, and read back as JSON values.
// A summary (the gate's) gets the config exit-gate gives it. r itself,
// which other tests share, is left as it is.
func asPrinted(t *testing.T, r *reports.Report) any {
	t.Helper()
	c := *r
	c.Env = reports.CurrentEnv()
	if len(r.Reports) > 0 {
		var cfg reports.Values
		cfg.Set("seed", int64(1))
		cfg.Set("quick", true)
		c.Config = cfg
	}
	var b bytes.Buffer
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(&b)
	if err != nil {
		t.Fatalf("%s: the JSON written does not read back: %v", r.Lab, err)
	}
	return v
}

// tableShapes checks what the schema cannot say (its description): every
// row of every table has one cell per column, and units and format, when
// present, one entry per column; in the reports a summary holds too.
func tableShapes(report any) error {
	r, _ := report.(map[string]any)
	tables, _ := r["tables"].([]any)
	for i, tv := range tables {
		tb, _ := tv.(map[string]any)
		cols, _ := tb["columns"].([]any)
		for _, k := range []string{"units", "format"} {
			if x, ok := tb[k]; ok {
				if a, _ := x.([]any); len(a) != len(cols) {
					return fmt.Errorf("%s: table %d (%v): %d %s for %d columns", r["lab"], i, tb["title"], len(a), k, len(cols))
				}
			}
		}
		rows, _ := tb["rows"].([]any)
		for j, rv := range rows {
			if row, _ := rv.([]any); len(row) != len(cols) {
				return fmt.Errorf("%s: table %d (%v): row %d has %d cells for %d columns", r["lab"], i, tb["title"], j, len(row), len(cols))
			}
		}
	}
	subs, _ := r["reports"].([]any)
	for _, s := range subs {
		if err := tableShapes(s); err != nil {
			return err
		}
	}
	return nil
}

// validReport is nil when report holds to the schema and to tableShapes.
func validReport(s *jsonschema.Schema, report any) error {
	if err := s.Validate(report); err != nil {
		return err
	}
	return tableShapes(report)
}

// TestReportsHoldToSchema: every built lab's --quick report, and the exit
// gate's holding them all, as --format json prints them, hold to
// schema/report.schema.json.
func TestReportsHoldToSchema(t *testing.T) {
	s := reportSchema(t)
	gate := quickGateReport(t)
	tests := []struct {
		name string
		r    *reports.Report
	}{{"exit-gate --quick", gate}}
	for _, r := range gate.Reports {
		tests = append(tests, struct {
			name string
			r    *reports.Report
		}{"run " + r.Lab + " --quick", r})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := validReport(s, asPrinted(t, tt.r)); err != nil {
				t.Errorf("%s --format json does not hold to %s:\n%v", tt.name, reportSchemaPath, err)
			}
		})
	}
	for _, l := range Labs() {
		if l.Built && !slices.ContainsFunc(gate.Reports, func(r *reports.Report) bool { return r.Lab == l.Name }) {
			t.Errorf("lab %s is built, but the gate holds no report of it to validate", l.Name)
		}
	}
}

// TestSchemaRejectsBadReports: a report the schema must refuse (a wrong
// type, a missing required field, a name out of its pattern, a bad value
// deep in a table or in a report the gate holds) is refused, and says
// where; the report undoctored is accepted.
func TestSchemaRejectsBadReports(t *testing.T) {
	s := reportSchema(t)
	gate := quickGateReport(t)
	var labReport *reports.Report // a lab's report with a table of rows
	for _, r := range gate.Reports {
		if len(r.Tables) > 0 && len(r.Tables[0].Rows) > 0 && len(r.Checks) > 0 {
			labReport = r
			break
		}
	}
	if labReport == nil {
		t.Fatal("no lab's --quick report has a table with rows and a check")
	}
	obj := func(v any) map[string]any { return v.(map[string]any) }
	arr := func(v any) []any { return v.([]any) }
	tests := []struct {
		name   string
		gate   bool            // doctor the gate's report, not a lab's
		doctor func(r any) any // changes the report read back
		where  string          // in the error: the location at fault
	}{
		{"as printed", false, func(r any) any { return r }, ""},
		{"the gate as printed", true, func(r any) any { return r }, ""},
		{"lab is a number", false, func(r any) any { obj(r)["lab"] = json.Number("7"); return r }, "'/lab'"},
		{"checks missing", false, func(r any) any { delete(obj(r), "checks"); return r }, "missing property 'checks'"},
		{"env missing", false, func(r any) any { delete(obj(r), "env"); return r }, "missing property 'env'"},
		{"a field the schema does not know", false, func(r any) any { obj(r)["warnings"] = []any{}; return r }, "warnings"},
		{"a metric in camelCase", false, func(r any) any { obj(obj(r)["metrics"])["peakBytes"] = json.Number("1"); return r }, "peakBytes"},
		{"a metric as text", false, func(r any) any { obj(obj(r)["metrics"])["peak_bytes"] = "1 KiB"; return r }, "'/metrics/peak_bytes'"},
		{"a check's pass as text", false, func(r any) any { obj(arr(obj(r)["checks"])[0])["pass"] = "yes"; return r }, "'/checks/0/pass'"},
		{"a check marked untimed", false, func(r any) any { obj(arr(obj(r)["checks"])[0])["timed"] = false; return r }, "'/checks/0/timed'"},
		{"no cores", false, func(r any) any { obj(obj(r)["env"])["cores"] = json.Number("0"); return r }, "'/env/cores'"},
		{"emulated as text", false, func(r any) any { obj(obj(r)["env"])["emulated"] = "no"; return r }, "'/env/emulated'"},
		{"a time not RFC 3339", false, func(r any) any { obj(obj(r)["env"])["time"] = "yesterday"; return r }, "'/env/time'"},
		{"a cell that is an object", false, func(r any) any {
			row := arr(arr(obj(arr(obj(r)["tables"])[0])["rows"])[0])
			row[0] = map[string]any{}
			return r
		}, "'/tables/0/rows/0/0'"},
		{"a row a cell short", false, func(r any) any {
			rows := arr(obj(arr(obj(r)["tables"])[0])["rows"])
			rows[0] = arr(rows[0])[1:]
			return r
		}, "row 0 has"},
		{"a lab's title missing in the gate", true, func(r any) any { delete(obj(arr(obj(r)["reports"])[0]), "title"); return r }, "'/reports/0'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := labReport
			if tt.gate {
				r = gate
			}
			err := validReport(s, tt.doctor(asPrinted(t, r)))
			switch {
			case tt.where == "" && err != nil:
				t.Errorf("the report as printed is refused: %v", err)
			case tt.where != "" && err == nil:
				t.Errorf("the doctored report is accepted")
			case tt.where != "" && !strings.Contains(err.Error(), tt.where):
				t.Errorf("refused, but the error does not say %s:\n%v", tt.where, err)
			}
		})
	}
}
