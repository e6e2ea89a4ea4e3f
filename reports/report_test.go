package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestCell(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{1536, "1536"},
		{int64(-3), "-3"},
		{2.0, "2"},
		{1.5, "1.500"},
		{1.23456, "1.235"},
		{12.3456, "12.35"},
		{1234.56, "1235"},
		{0.000123, "0.000123"},
		{1.5e9, "1500000000"},
		{1.25e20, "1.25e+20"},
		{math.NaN(), "NaN"},
		{float32(0.5), "0.5000"},
		{true, "yes"},
		{"text", "text"},
	}
	for _, tc := range tests {
		if got := Cell(tc.in); got != tc.want {
			t.Errorf("Cell(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValuesKeepOrderThroughJSON(t *testing.T) {
	var v Values
	v.Set("zeta_bytes", 3)
	v.Set("alpha_ms", 1.5)
	v.Set("zeta_bytes", 4) // replacing keeps the first position
	v.Set("nan_ratio", math.NaN())
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"zeta_bytes":4,"alpha_ms":1.5,"nan_ratio":null}`; string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	var back Values
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if strings.Join(back.Keys(), ",") != "zeta_bytes,alpha_ms,nan_ratio" {
		t.Errorf("Unmarshal keys = %v", back.Keys())
	}
	if x, _ := back.Get("zeta_bytes"); x != 4.0 {
		t.Errorf("zeta_bytes = %v, want 4", x)
	}
}

func sample() *Report {
	r := New("demo", "A demonstration")
	r.Config.Set("seed", 1)
	r.Metric("planned_peak_bytes", 1536)
	t := r.AddTable("Arena", Text("planner"), Bytes("peak"))
	t.Row("independent", 2304)
	t.Row("best-fit", 1536)
	r.Check("plan verified", true, "no overlap among %d buffers", 3)
	r.Note("b and a are live together at kernel 1.")
	return r
}

func TestRenderFormats(t *testing.T) {
	r := sample()
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			if err := r.Render(&b, format); err != nil {
				t.Fatal(err)
			}
			s := b.String()
			want := []string{"1.5 KiB", "best-fit"}
			if format == "json" || format == "csv" {
				want[0] = "1536"
			}
			for _, want := range want {
				if !strings.Contains(s, want) {
					t.Errorf("%s output lacks %q:\n%s", format, want, s)
				}
			}
		})
	}
	var b bytes.Buffer
	if err := r.Render(&b, "xml"); err == nil {
		t.Error("Render(xml) succeeded, want an error")
	}
}

func TestJSONSchema(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"lab", "title", "config", "env", "metrics", "tables", "checks", "figures"} {
		if _, ok := m[key]; !ok {
			t.Errorf("JSON report lacks %q", key)
		}
	}
}

func TestFailedAndVerdict(t *testing.T) {
	r := sample()
	if r.Failed() {
		t.Fatal("Failed() with all checks passing")
	}
	r.Check("bound respected", false, "peak 10 < bound 12")
	if !r.Failed() {
		t.Fatal("Failed() = false after a failing check")
	}
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "1 of 2 checks FAILED") {
		t.Errorf("text report does not state the failure:\n%s", b.String())
	}
}

func TestWriteFigures(t *testing.T) {
	p := plot.New()
	pts := plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 2}}
	line, err := plotter.NewLine(pts)
	if err != nil {
		t.Fatal(err)
	}
	p.Add(line)
	r := New("demo", "figure")
	r.AddFigure("curve", p, 4*vg.Inch, 3*vg.Inch)
	dir := t.TempDir()
	if err := r.WriteFigures(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range r.Figures {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) < 100 {
			t.Errorf("figure %s: %d bytes, %v", name, len(b), err)
		}
	}
	svg, _ := os.ReadFile(filepath.Join(dir, "curve.svg"))
	if !bytes.HasPrefix(bytes.TrimSpace(svg), []byte("<?xml")) && !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("curve.svg is not SVG: %.60s", svg)
	}
}

// TestAddTableKeepsEarlierTables: rows added through a table returned
// earlier land in the report even after more tables were added.
func TestAddTableKeepsEarlierTables(t *testing.T) {
	r := New("demo", "tables")
	first := r.AddTable("first", Int("a"))
	for i := 0; i < 10; i++ {
		r.AddTable("more", Int("b"))
	}
	first.Row(1)
	if len(r.Tables[0].Rows) != 1 {
		t.Fatalf("first table has %d rows, want 1", len(r.Tables[0].Rows))
	}
}

// TestTimedCheck: a timed check's verdict is its interval's place against
// the target: above fails the report like any other check, straddling is
// inconclusive (the report has not failed, its verdict says so), and the
// check's timing survives JSON, where an untimed check carries none.
func TestTimedCheck(t *testing.T) {
	above := Timing{Target: 1.1, Median: 1.3, Low: 1.2, High: 1.4, Level: 0.95, Rounds: 12, Spread: 0.3, Unit: "x"}
	straddling := above
	straddling.Low, straddling.High = 1.0, 1.2
	below := above
	below.Low, below.High = 0.9, 1.1 // at the target counts: "at most"
	r := New("lab", "t")
	r.Check("exact", true, "")
	if v := r.TimedCheck("steady", below, ""); v != Pass {
		t.Errorf("interval 0.9..1.1 against 1.1: %s, want pass", v)
	}
	if v := r.TimedCheck("noisy", straddling, "%d rounds", 12); v != Inconclusive {
		t.Errorf("interval 1.0..1.2 against 1.1: %s, want inconclusive", v)
	}
	if r.Failed() || r.Outcome() != Inconclusive || r.Inconclusive() != 1 {
		t.Errorf("with an inconclusive check: failed %v, outcome %s, %d inconclusive", r.Failed(), r.Outcome(), r.Inconclusive())
	}
	if v := r.TimedCheck("fast", above, "%d req/s", 5); v != Fail {
		t.Fatalf("interval 1.2..1.4 against 1.1: %s, want fail", v)
	}
	if !r.Failed() || r.Outcome() != Fail {
		t.Error("a failed timed check does not fail the report")
	}
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `"timed"`); n != 3 {
		t.Errorf("JSON has %d timed marks, want three:\n%s", n, b.String())
	}
	if !strings.Contains(b.String(), `"verdict": "inconclusive"`) || !strings.Contains(b.String(), `"verdict": "fail"`+"\n}") {
		t.Errorf("JSON lacks a check's inconclusive verdict or the report's fail:\n%s", b.String())
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Checks, r.Checks) {
		t.Errorf("checks back from JSON %+v, want %+v", back.Checks, r.Checks)
	}
	if back.Checks[0].Timing != nil || back.Checks[2].Outcome() != Inconclusive {
		t.Errorf("back from JSON: untimed timing %v, noisy %s", back.Checks[0].Timing, back.Checks[2].Outcome())
	}
	var text bytes.Buffer
	if err := r.Render(&text, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "INCONCLUSIVE") || !strings.Contains(text.String(), "95% interval 1.000x to 1.200x") {
		t.Errorf("text lacks the inconclusive check and its interval:\n%s", text.String())
	}
}
