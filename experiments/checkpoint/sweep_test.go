package checkpoint

import (
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/reports"
)

// tinySweep measures tiny (no bf16 rows) and its sweep of three budgets,
// and reports them (the lab's own checks of the machinery aside).
func tinySweep(t *testing.T) *reports.Report {
	t.Helper()
	cfg := Lab.Defaults().(*checkpointConfig)
	cfg.Configs, cfg.Budgets, cfg.Steps, cfg.Profile, cfg.PrecisionShapes = []string{"tiny"}, 3, 1, 2, nil
	mc, _ := ckShape("tiny")
	mc.Dropout = cfg.Dropout
	res, err := checkpointShape(context.Background(), "tiny", mc, cfg, lab.Options{Seed: 1, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	r := reports.New("checkpoint", "tiny")
	res.report(r, "tiny")
	labtest.ChecksHold(t, r, "")
	return r
}

// sweepTable is the report's budget sweep table on shape.
func sweepTable(t *testing.T, r *reports.Report, shape string) *reports.Table {
	t.Helper()
	for _, tb := range r.Tables {
		if strings.HasPrefix(tb.Title, "Budget sweep on "+shape+":") {
			return tb
		}
	}
	t.Fatalf("no budget sweep table on %s", shape)
	return nil
}

// timing are the columns that hold wall-clock figures (or ratios of them).
var timing = map[string]bool{"step ms": true, "spread": true, "ms ÷ none": true, "dp ms": true, "its ms": true}

// untimed is everything in a report that must be the same for the same
// seed: every table's cells outside the timing columns and its constants
// (as JSON keeps them), every metric but the step-time ratios, and every
// check's name and outcome, and for a budget's check its schedule.
func untimed(r *reports.Report) []string {
	var out []string
	for _, tb := range r.Tables {
		for _, c := range tb.Constants {
			if !timing[c.Column.Name] {
				out = append(out, fmt.Sprintf("%s: %s = %v", tb.Title, c.Column.Name, c.Column.Raw(c.Value)))
			}
		}
		for i, row := range tb.Rows {
			for j, c := range tb.Columns {
				if !timing[c.Name] {
					out = append(out, fmt.Sprintf("%s: row %d %s = %v", tb.Title, i, c.Name, c.Raw(row[j])))
				}
			}
		}
	}
	for _, k := range r.Metrics.Keys() {
		if !strings.Contains(k, "time_ratio") {
			v, _ := r.Metrics.Get(k)
			out = append(out, fmt.Sprintf("metric %s = %v", k, v))
		}
	}
	for _, c := range r.Checks {
		s := fmt.Sprintf("check %s: %v", c.Name, c.Pass)
		if _, sched, ok := strings.Cut(c.Detail, "schedule "); ok {
			s += " schedule " + sched
		}
		out = append(out, s)
	}
	return out
}

// TestBudgetSweepSameSeed: the lab run twice with the same seed gives the
// same figures, timings aside: the budgets, the dynamic program's planned
// peaks and schedules, the fixed policy each is compared with and the
// cost ratio, every peak and kept size. On the code before, the dynamic
// program chose by the measured segment times, and its peaks and
// schedules followed the clock (and the comparison ratio always did).
func TestBudgetSweepSameSeed(t *testing.T) {
	a, b := untimed(tinySweep(t)), untimed(tinySweep(t))
	if !reflect.DeepEqual(a, b) {
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Errorf("same seed, different figures:\n  %s\n  %s", a[i], b[i])
			}
		}
		if len(a) != len(b) {
			t.Errorf("same seed: %d figures against %d", len(a), len(b))
		}
	}
	var scheduled bool
	for _, s := range a {
		scheduled = scheduled || strings.Contains(s, " schedule F0 ")
	}
	if !scheduled {
		t.Error("no budget's check names its schedule")
	}
}

// TestBudgetSweepLabelAgrees: what the sweep table says once above its
// rows holds for every row: no row's planned peak is below a stated
// smallest peak, and no row's budget below a stated smallest budget. The
// smallest planned peak is one the rows reach. On the code before, the
// table stated the chain model's smallest feasible budget as the smallest
// feasible peak, above the first row's planned peak.
func TestBudgetSweepLabelAgrees(t *testing.T) {
	tb := sweepTable(t, tinySweep(t), "tiny")
	col := func(name string) int {
		for j, c := range tb.Columns {
			if c.Name == name {
				return j
			}
		}
		t.Fatalf("no column %q in %v", name, tb.Columns)
		return -1
	}
	peak, budget := col("dp peak"), col("budget")
	stated := 0
	for _, c := range tb.Constants {
		v := labtest.Float(c.Value)
		var j int
		switch {
		case strings.Contains(c.Column.Name, "peak"):
			j = peak
		case strings.Contains(c.Column.Name, "budget"):
			j = budget
		default:
			continue
		}
		stated++
		reached := false
		for i, row := range tb.Rows {
			x := labtest.Float(row[j])
			if x < v {
				t.Errorf("%q = %s, but row %d's %s is %s", c.Column.Name, reports.FormatBytes(v),
					i, tb.Columns[j].Name, reports.FormatBytes(x))
			}
			reached = reached || x == v
		}
		if !reached {
			t.Errorf("%q = %s: no row's %s is it", c.Column.Name, reports.FormatBytes(v), tb.Columns[j].Name)
		}
	}
	if stated == 0 {
		t.Errorf("the sweep states no smallest peak or budget: %v", tb.Constants)
	}
}
