// Package reports owns the Report value every lab returns and its renderers:
// a terminal table (tablewriter v1), markdown, JSON (schema/report.schema.json),
// CSV, and figures drawn with gonum/plot. It knows nothing about any lab.
//
// A table's columns are typed (Text, Int, Float, Bytes, Duration, Ratio,
// Percent) and its cells hold values, not text: text and markdown format
// each column one way (bytes in KiB/MiB/GiB, a fixed number of decimals),
// JSON and CSV keep the exact values. Text output fits Width (100) columns:
// long text wraps inside its column or becomes a numbered note under the
// table, a column whose value never changes is said once above the table,
// and a passed check's detail is shortened to one line (a failed one is
// shown in full). Markdown, JSON and CSV hold everything in full.
package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// Report is the result of one lab run.
type Report struct {
	Lab     string   `json:"lab"`
	Title   string   `json:"title"`
	Config  Values   `json:"config"`
	Env     Env      `json:"env"`
	Metrics Values   `json:"metrics"`
	Tables  []*Table `json:"tables"`
	Checks  []Check  `json:"checks"`
	Figures []string `json:"figures"`
	// Notes are short paragraphs printed after the tables: what a figure
	// means, what was left out and why.
	Notes []string `json:"notes,omitempty"`
	// Reports are the full reports a summary is made of (the exit gate's
	// labs); text and markdown print them before the summary.
	Reports []*Report `json:"reports,omitempty"`

	// Silent marks a report no one prints: a job's rank other than 0,
	// whose report rank 0's stands for.
	Silent bool `json:"-"`

	figures []Figure
	files   map[string][]byte // figures drawn elsewhere (AttachFile), by file name
}

// Check is one comparison that can fail.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
	// Timed marks a check decided by wall-clock time: a target that a
	// slower or busier machine may miss while the code is right. Its
	// verdict comes from a statistic over rounds (Timing), so noise makes
	// it inconclusive, never failed; the tests, which run beside each other
	// on shared machines, log its misses instead (benchmarks measure speed).
	Timed bool `json:"timed,omitempty"`
	// Verdict is pass, fail or (a timed check only) inconclusive; Pass is
	// true for pass alone.
	Verdict Verdict `json:"verdict"`
	// Timing is how a timed check was decided: its rounds, interval and
	// target.
	Timing *Timing `json:"timing,omitempty"`
}

// New returns an empty report for a lab.
func New(lab, title string) *Report {
	return &Report{Lab: lab, Title: title, Tables: []*Table{}, Checks: []Check{}, Figures: []string{}}
}

// Metric records a measured value. Names are snake_case with the unit as suffix.
func (r *Report) Metric(name string, v any) { r.Metrics.Set(name, v) }

// AddTable appends a table with these columns and returns it for rows to
// be added.
func (r *Report) AddTable(title string, columns ...Column) *Table {
	t := &Table{Title: title, Columns: columns, Rows: [][]any{}}
	r.Tables = append(r.Tables, t)
	return t
}

// Check records a comparison and returns its outcome.
func (r *Report) Check(name string, pass bool, detail string, args ...any) bool {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	v := Fail
	if pass {
		v = Pass
	}
	r.Checks = append(r.Checks, Check{Name: name, Pass: pass, Verdict: v, Detail: detail})
	return pass
}

// Note appends a paragraph of explanation.
func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Failed reports whether any check failed, here or in a report it holds
// (an inconclusive timed check has not failed).
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Outcome() == Fail {
			return true
		}
	}
	for _, sub := range r.Reports {
		if sub.Failed() {
			return true
		}
	}
	return false
}

// Cell formats one value for a config line or a text cell: integers
// plainly, floats with four significant digits, booleans as yes/no, lists
// comma-separated (as --set takes them), everything else with %v.
func Cell(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case nil:
		return Missing
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		parts := make([]string, rv.Len())
		for i := range parts {
			parts[i] = Cell(rv.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func formatFloat(x float64) string {
	ax := math.Abs(x)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return strconv.FormatFloat(x, 'g', -1, 64)
	case x == math.Trunc(x) && ax < 1e15:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case ax >= 1e-3 && ax < 1e6:
		// four significant digits in plain notation: 1.536, 12.35, 1235
		decimals := max(0, 3-int(math.Floor(math.Log10(ax))))
		return strconv.FormatFloat(x, 'f', decimals, 64)
	default:
		return strconv.FormatFloat(x, 'g', 4, 64)
	}
}

// Values is an ordered string-keyed map: it marshals to a JSON object whose
// keys keep insertion order, so reports read in the order they were built.
type Values struct {
	keys []string
	vals map[string]any
}

// Set adds or replaces a key.
func (v *Values) Set(k string, x any) {
	if v.vals == nil {
		v.vals = map[string]any{}
	}
	if _, ok := v.vals[k]; !ok {
		v.keys = append(v.keys, k)
	}
	v.vals[k] = x
}

// Has reports whether k is set.
func (v Values) Has(k string) bool { _, ok := v.vals[k]; return ok }

// Get returns the value for k.
func (v Values) Get(k string) (any, bool) { x, ok := v.vals[k]; return x, ok }

// Float returns k's value as a number: false when k is not set or its
// value is not a number (a null read back from JSON, NaN, is not).
func (v Values) Float(k string) (float64, bool) {
	x, ok := v.vals[k]
	if !ok {
		return 0, false
	}
	f, ok := number(x)
	return f, ok && !math.IsNaN(f)
}

// Keys returns the keys in insertion order.
func (v Values) Keys() []string { return v.keys }

// Len is the number of keys.
func (v Values) Len() int { return len(v.keys) }

// MarshalJSON writes the object in insertion order.
func (v Values) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range v.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		x := v.vals[k]
		if f, ok := x.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			x = nil // JSON has no NaN; null says "not measured"
		}
		vb, err := json.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("reports: value of %q: %w", k, err)
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an object, keeping the order of its keys.
func (v *Values) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("reports: want a JSON object, got %v", t)
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		var x any
		if err := dec.Decode(&x); err != nil {
			return err
		}
		if n, ok := x.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				x = f
			}
		}
		v.Set(kt.(string), x)
	}
	_, err = dec.Token()
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// MarshalJSON writes the report with its verdict (Outcome) after its
// fields: "pass", "fail" or "inconclusive".
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		*plain
		Verdict Verdict `json:"verdict"`
	}{(*plain)(r), r.Outcome()})
}
