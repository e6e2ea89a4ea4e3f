package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// TestArtifactEvidence: the gate opens with the five artifacts; every
// built one has its figures from its labs' metrics (a metric a row names
// and its lab does not report is a failure here, never a blank), its
// verdict is its labs' own, and its command names its built labs.
func TestArtifactEvidence(t *testing.T) {
	gate := quickGateReport(t)
	if len(artifacts) != 5 {
		t.Errorf("%d artifacts, want the chapter's five", len(artifacts))
	}
	ran := map[string]*reports.Report{}
	for _, r := range gate.Reports {
		ran[r.Lab] = r
	}
	rows := artifactRows(ran, nil, true, 1)
	for i, row := range rows {
		a := artifacts[i]
		for _, m := range row.missing {
			t.Errorf("%s: metric %s is not in its lab's report", row.name, m)
		}
		want := reports.Pass
		built := 0
		for _, l := range a.labs {
			if r := ran[l]; r != nil {
				built++
				if r.Outcome() == reports.Fail || want != reports.Fail && r.Outcome() == reports.Inconclusive {
					want = r.Outcome()
				}
			} else if l, err := Find(l); err != nil || l.Built {
				t.Errorf("%s: lab %s is neither a built lab that ran nor a planned one (%v)", row.name, a.labs, err)
			}
		}
		switch {
		case built == 0:
			if row.verdict != "NOT BUILT" {
				t.Errorf("%s: no lab built, verdict %q", row.name, row.verdict)
			}
			continue
		case row.verdict != strings.ToUpper(string(want)):
			t.Errorf("%s: verdict %q, its labs' %s", row.name, row.verdict, want)
		}
		if len(row.figures) < 2 {
			t.Errorf("%s: %d figures, want two or three that make the case", row.name, len(row.figures))
		}
		for _, l := range a.labs {
			if ran[l] != nil && !strings.Contains(row.command, "gptlab run "+l+" --quick") {
				t.Errorf("%s: command %q does not run %s", row.name, row.command, l)
			}
		}
	}
	first := gate.Tables[0]
	if !strings.Contains(first.Title, "five artifacts") || first.Rows[0][0] != artifacts[0].name {
		t.Errorf("the gate's first table is %q (first row %v), want the artifacts", first.Title, first.Rows[0])
	}
	var text bytes.Buffer
	if err := first.WriteText(&text, reports.Width); err != nil {
		t.Fatal(err)
	}
	t.Logf("the artifact table:\n%s", text.String())
}

// TestArtifactRowsNegative: the negative controls of the table: a lab
// whose report lacks a metric is named missing, a failed lab fails its
// artifact, an inconclusive one makes it inconclusive, and no lab built
// is NOT BUILT with no command.
func TestArtifactRowsNegative(t *testing.T) {
	bare := reports.New("checkpoint", "no metrics")
	bare.Check("something", true, "")
	unsure := reports.New("serving", "noisy")
	unsure.TimedCheck("fast", reports.Timing{Target: 1, Median: 1, Low: 0.9, High: 1.1, Level: 0.95, Rounds: 10}, "")
	rows := artifactRows(map[string]*reports.Report{"checkpoint": bare, "serving": unsure},
		map[string]bool{"precision": true}, false, 7)
	byName := map[string]artifactRow{}
	for _, r := range rows {
		byName[r.name] = r
	}
	if r := byName["checkpointing"]; len(r.missing) == 0 || r.verdict != "PASS" || r.command != "gptlab run checkpoint --seed 7" {
		t.Errorf("checkpointing without metrics: %+v", r)
	}
	if r := byName["a measured precision optimization"]; r.verdict != "FAIL" {
		t.Errorf("precision that did not run: %+v", r)
	}
	if r := byName["an inference scheduling experiment"]; r.verdict != "INCONCLUSIVE" {
		t.Errorf("serving with an inconclusive check: %+v", r)
	}
	if r := byName["buffer reuse"]; r.verdict != "NOT BUILT" || r.command != "" {
		t.Errorf("buffer reuse with no lab: %+v", r)
	}
}

// TestStrict: an inconclusive timed check leaves the exit status 0 and
// says so in the JSON; --strict makes it a failure (exit 1).
func TestStrict(t *testing.T) {
	r := reports.New("serving", "noisy")
	r.Check("exact", true, "")
	r.TimedCheck("fast", reports.Timing{Target: 1, Median: 1, Low: 0.9, High: 1.1, Level: 0.95, Rounds: 10, Unit: "x"}, "")
	var out bytes.Buffer
	if err := emitStrict(r, "json", "", &out, false); err != nil {
		t.Errorf("inconclusive without --strict: %v, want exit 0", err)
	}
	if !strings.Contains(out.String(), `"verdict": "inconclusive"`+"\n}") {
		t.Errorf("the report's JSON does not end with its inconclusive verdict:\n%s", out.String())
	}
	if err := emitStrict(r, "table", "", &out, true); !errors.Is(err, errChecksFailed) {
		t.Errorf("inconclusive with --strict: %v, want a failed check (exit 1)", err)
	}
	for _, cmd := range []string{"run", "exit-gate"} {
		code, help, _ := runMain(cmd, "--help")
		if code != 0 || !strings.Contains(help, "--strict") {
			t.Errorf("%s --help: exit %d, no --strict in:\n%s", cmd, code, help)
		}
	}
}

// TestReportCommand: gptlab report DIR prints a saved report again in
// every format, running nothing, with the report's exit status; a bad DIR
// or a malformed report.json is one line and exit 2.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	r := reports.New("reuse", "saved")
	r.Check("held", true, "fine")
	r.Metric("peak_bytes", 1536)
	if err := writeReportDir(r, dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"table", "markdown", "html", "json", "csv"} {
		code, out, errs := runMain("report", dir, "--format", f)
		if code != 0 || !strings.Contains(out, "peak_bytes") && f != "table" && f != "markdown" || errs != "" {
			t.Errorf("report --format %s: exit %d, stderr %q, out:\n%s", f, code, errs, out)
		}
	}
	failing := t.TempDir()
	r.Check("broke", false, "no")
	if err := writeReportDir(r, failing); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runMain("report", failing); code != 1 {
		t.Errorf("report of a failed check: exit %d, want 1", code)
	}
	malformed := t.TempDir()
	os.WriteFile(filepath.Join(malformed, "report.json"), []byte(`{"lab": "x", "tables": [`), 0o644)
	file := filepath.Join(malformed, "report.json")
	for _, args := range [][]string{{"report", filepath.Join(dir, "nope")}, {"report", malformed}, {"report", file},
		{"report", t.TempDir()}, {"report"}, {"report", dir, "--format", "pdf"}} {
		code, _, errs := runMain(args...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || errs == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errs)
		}
	}
}

// Timings and what the runtime measures of itself differ from run to run;
// everything else a report holds must not. These name them: metrics by
// their unit suffix or what they time, table columns by their header
// (a Duration column, unit "s", is a timing by its type).
var (
	timingMetric = regexp.MustCompile(`(^|_)(ms|us|seconds)(_|$)|_per_s$|_s$|step_time_ratio|latency_ratio|speedup|gflop|` +
		// allocations per step, as the "allocs per step" column: the TapeMachine's
		// sync.Pool reuse depends on when the GC ran, and the arena's step, which
		// allocates nothing itself, now and then counts one of the runtime's own
		// (a processor's timer heap or wait records growing when the pool's
		// goroutines first nap or park there)
		`_allocs_per_step$`)
	timingColumn = regexp.MustCompile(`\bms\b|\(s\)|time|spread|GB/s|/s$|\bns\b|^runs$|^wall|^plan$|^mean plan$|` +
		`^simulation$|^sweep$|^compute$|^exposed$|overlap|^saved$|^bf16 |^f32 sgemm$|/ f32$|` +
		`^allocs per step$|^allocated per step$|^int8/f32$|/pt$|\(heap\)|^won$`)
)

// wallClockLabs are labs whose workload itself comes from a measurement:
// the serving engine's arrival rates and SLOs are multiples of its
// measured capacity, so every table and metric of it is a timing.
// TestQuickGateReproducible does not run them twice: of them only the
// untimed checks (the engine's outputs against decoding alone, its
// invariants) could be compared, and their package's tests hold those.
var wallClockLabs = map[string]bool{"serving-engine": true}

// TestQuickGateReproducible: a --quick gate and every lab's --quick run
// again with the same seed give the same figures, timings aside (and the
// wall-clock labs aside): every metric, every table cell and every untimed
// check's verdict.
func TestQuickGateReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick gate a second time")
	}
	first := quickGateReport(t)
	// The second time every lab but the wall-clock ones, as the gate runs
	// them: of those only untimed checks would be compared, and their own
	// package's tests hold them.
	var second []*reports.Report
	for _, l := range Labs() {
		if !l.Built || wallClockLabs[l.Name] {
			continue
		}
		cfg, err := l.Config(true, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := runLab(context.Background(), l, cfg, lab.Options{Seed: 1, Log: io.Discard})
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		r.Config.Set("quick", true)
		second = append(second, r)
	}
	var firsts []*reports.Report
	for _, r := range first.Reports {
		if !wallClockLabs[r.Lab] {
			firsts = append(firsts, r)
		}
	}
	if len(firsts) != len(second) || len(firsts) == len(first.Reports) {
		t.Fatalf("%d reports of %d in the gate, then %d", len(firsts), len(first.Reports), len(second))
	}
	same := func(a, b any) bool { return reflect.DeepEqual(a, b) }
	compared := 0
	for i, a := range firsts {
		b := second[i]
		if !same(a.Config, b.Config) {
			t.Errorf("%s: config %v, then %v", a.Lab, a.Config, b.Config)
		}
		for _, k := range a.Metrics.Keys() {
			if timingMetric.MatchString(k) {
				continue
			}
			x, _ := a.Metrics.Get(k)
			y, ok := b.Metrics.Get(k)
			compared++
			if !ok || !same(x, y) && !(isNaN(x) && isNaN(y)) {
				t.Errorf("%s: metric %s = %v, then %v", a.Lab, k, x, y)
			}
		}
		if len(a.Tables) != len(b.Tables) {
			t.Errorf("%s: %d tables, then %d", a.Lab, len(a.Tables), len(b.Tables))
			continue
		}
		for j, ta := range a.Tables {
			tb := b.Tables[j]
			if ta.Title != tb.Title || len(ta.Rows) != len(tb.Rows) {
				t.Errorf("%s: table %q of %d rows, then %q of %d", a.Lab, ta.Title, len(ta.Rows), tb.Title, len(tb.Rows))
				continue
			}
			for c, col := range ta.Columns {
				if col.Kind == reports.DurationKind || timingColumn.MatchString(col.Name) {
					continue
				}
				for r := range ta.Rows {
					compared++
					if x, y := ta.Rows[r][c], tb.Rows[r][c]; !same(x, y) && !(isNaN(x) && isNaN(y)) {
						t.Errorf("%s: table %q row %d column %q: %v, then %v", a.Lab, ta.Title, r+1, col.Name, x, y)
					}
				}
			}
		}
		for j, c := range a.Checks {
			if j >= len(b.Checks) || b.Checks[j].Name != c.Name {
				t.Errorf("%s: check %d is %q, then not", a.Lab, j, c.Name)
				continue
			}
			if !c.Timed && c.Outcome() != b.Checks[j].Outcome() {
				t.Errorf("%s: check %q: %s, then %s", a.Lab, c.Name, c.Outcome(), b.Checks[j].Outcome())
			}
		}
	}
	t.Logf("%d figures compared, timings aside", compared)
	if compared < 500 {
		t.Errorf("only %d figures compared: the exclusions swallow the reports", compared)
	}
}

func isNaN(x any) bool { f, ok := x.(float64); return ok && math.IsNaN(f) }
