package reports

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// sampleReport is a summary holding a lab's report, with every kind of
// column, a timed check and notes: the JSON the fuzzer starts from.
func sampleReport() *Report {
	lab := New("reuse", "Reuse")
	lab.Config.Set("seed", 1)
	lab.Metric("peak_bytes", 1536)
	t := lab.AddTable("Plans", Text("plan"), Bytes("peak"), Ratio("vs bound"), Percent("share", 1))
	t.Row("search", 1536, 1.0, 0.25)
	lab.Check("plan fits", true, "1536 bytes")
	lab.TimedCheck("fast", Timing{Target: 1.1, Median: 1, Low: 0.9, High: 1.2, Level: 0.95, Rounds: 12, Unit: "x"}, "")
	lab.Note("A note.")
	gate := New("exit-gate", "Gate")
	gate.Reports = []*Report{lab}
	gate.Checks = append(gate.Checks, lab.Checks...)
	return gate
}

// TestReadReportRoundTrip: a report read back renders as it did, and the
// reader refuses what the renderers cannot show, naming it.
func TestReadReportRoundTrip(t *testing.T) {
	r := sampleReport()
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(js.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"table", "markdown"} {
		var a, b bytes.Buffer
		if err := r.Render(&a, format); err != nil {
			t.Fatal(err)
		}
		if err := back.Render(&b, format); err != nil {
			t.Fatal(err)
		}
		if a.String() != b.String() {
			t.Errorf("%s differs after a JSON round trip:\n%s\n---\n%s", format, a.String(), b.String())
		}
	}
	for _, tc := range []struct{ json, want string }{
		{`[]`, "not a report"},
		{`{"lab":"reuse"} {}`, "more after"},
		{`{"lab":"Bad Name"}`, `lab "Bad Name"`},
		{`{"lab":"x","tables":[{"title":"t","columns":["a"],"rows":[["1","2"]]}]}`, "2 cells for 1 columns"},
		{`{"lab":"x","checks":[{"name":"c","pass":true,"verdict":"fail"}]}`, "pass true with verdict fail"},
		{`{"lab":"x","checks":[{"name":"c","verdict":"maybe"}]}`, `verdict "maybe"`},
		{`{"lab":"x","figures":["../a.svg"]}`, "want a file name"},
		{`{"lab":"x","reports":[null]}`, "report 1 is null"},
	} {
		_, err := ReadReport([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadReport(%s) = %v, want one line saying %q", tc.json, err, tc.want)
		}
	}
}

// FuzzReadReport: whatever the bytes, the reader returns a report or an
// error, never panics; a report it accepts renders in every format and
// reads back from its own JSON.
func FuzzReadReport(f *testing.F) {
	var js bytes.Buffer
	if err := sampleReport().WriteJSON(&js); err != nil {
		f.Fatal(err)
	}
	f.Add(js.Bytes())
	f.Add([]byte(`{"lab":"x","tables":[{"title":"t","columns":["a"],"units":["s"],"rows":[[1.5]]}]}`))
	f.Add([]byte(`{"lab":"x","checks":[{"name":"c","pass":false,"verdict":"inconclusive","timing":{"low":null}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ReadReport(data)
		if err != nil {
			return
		}
		for _, format := range append(Formats[:len(Formats):len(Formats)], "html") {
			if format == "html" {
				if err := r.WriteHTML(io.Discard, os.DevNull, nil); err != nil {
					t.Fatalf("html: %v", err)
				}
				continue
			}
			if err := r.Render(io.Discard, format); err != nil && format != "json" {
				t.Fatalf("%s: %v", format, err)
			}
		}
		var out bytes.Buffer
		if err := r.WriteJSON(&out); err != nil {
			return // a value JSON cannot hold (an infinity in a cell) is refused on writing
		}
		if _, err := ReadReport(out.Bytes()); err != nil {
			t.Fatalf("its own JSON does not read back: %v\n%s", err, out.String())
		}
	})
}
