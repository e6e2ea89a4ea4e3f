package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/internal/testutil"
	"gptlab/reports"
)

// The exit gate's --quick run is shared by the tests that read reports: it
// runs every built lab once (a few seconds on 2 cores).
var quickGate struct {
	once sync.Once
	r    *reports.Report
	err  error
}

// quickGateReport is that run. Under -short when emulated (qemu-user), the tests that read it skip: the
// gate over every lab takes over 27 minutes there. The labs' own packages
// run their --quick reports emulated; the gate runs natively here and as
// go run . exit-gate --quick in CI.
func quickGateReport(t *testing.T) *reports.Report {
	t.Helper()
	testutil.SkipEmulated(t, "the quick exit gate over every lab runs natively "+
		"(go test, .ci/run's exit-gate --quick); each lab's package runs its --quick report emulated")
	quickGate.once.Do(func() {
		quickGate.r, quickGate.err = runGate(context.Background(), true, lab.Options{Seed: 1, Log: io.Discard},
			func(*reports.Report) error { return nil })
	})
	if quickGate.err != nil {
		t.Fatal(quickGate.err)
	}
	return quickGate.r
}

// TestQuickReportsFit100Columns renders every built lab's --quick report,
// and the exit gate's, as text at 100 columns: no line may be longer.
func TestQuickReportsFit100Columns(t *testing.T) {
	gate := quickGateReport(t)
	built := 0
	for _, l := range Labs() {
		if l.Built {
			built++
		}
	}
	if len(gate.Reports) != built {
		t.Fatalf("the gate holds %d reports for %d built labs", len(gate.Reports), built)
	}
	summary := *gate
	summary.Reports = nil
	for _, r := range append(gate.Reports, &summary, gate) {
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		n, line := testutil.WidestLine(b.String())
		name := r.Lab
		if r == gate {
			name = "exit-gate with every lab"
		}
		t.Logf("%s --quick: widest line %d characters", name, n)
		if n > reports.Width {
			t.Errorf("%s --quick: a line of %d characters, more than %d:\n%s", name, n, reports.Width, line)
		}
	}
	if n, _ := testutil.WidestLine(strings.Repeat("x", 101)); n != 101 { // the measure itself
		t.Errorf("widest of 101 x = %d", n)
	}
}

// TestGateJSONHoldsEveryReport: exit-gate --format json carries every
// lab's full report, not only the summary, and its checks keep their
// timed marks.
func TestGateJSONHoldsEveryReport(t *testing.T) {
	gate := quickGateReport(t)
	var b bytes.Buffer
	if err := gate.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Checks  []reports.Check
		Reports []struct {
			Lab    string
			Config map[string]any
			Tables []json.RawMessage
			Checks []reports.Check
		}
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	checks, timed := 0, 0
	for _, r := range j.Reports {
		checks += len(r.Checks)
		for _, c := range r.Checks {
			if c.Timed {
				timed++
			}
		}
		if r.Lab != "test-probe" && len(r.Tables) == 0 {
			t.Errorf("report %s in the gate's JSON has no tables", r.Lab)
		}
		if r.Lab == "arena" && (r.Config["configs"] == nil || r.Config["steps"] != 2.0) {
			t.Errorf("arena --quick config = %v, want the configs and steps that ran (steps 2)", r.Config)
		}
	}
	if checks != len(j.Checks) || checks == 0 {
		t.Errorf("the labs' reports hold %d checks, the gate %d", checks, len(j.Checks))
	}
	gateTimed := 0
	for _, c := range j.Checks {
		if c.Timed {
			gateTimed++
		}
	}
	if gateTimed != timed || timed == 0 {
		t.Errorf("the labs' reports hold %d timed checks, the gate %d; want the same, more than none (serving's speed)", timed, gateTimed)
	}
}
