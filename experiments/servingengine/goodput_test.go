package servingengine

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/internal/testutil"
	"gptlab/reports"
	"gptlab/serving"
)

// TestGoodputControl runs the goodput section with limits no request can
// miss (1 s): both policies' goodput is then their throughput, so the
// check that continuous batching wins by goodputWin must not pass and the
// ratio sits near 1 (continuous finishing sooner came out 1.01x in every
// round once, which a check of "more than fixed's" passed). The check can
// fail.
func TestGoodputControl(t *testing.T) {
	testutil.SkipEmulated(t, "its arrival rates come from nominal native timings (50 µs a batch-1 step), "+
		"which an emulated engine, some 20x slower, cannot keep up with, so every request would miss; "+
		"TestLabQuick runs the goodput section emulated on rates from the engine's own measured speed")
	cfg, err := Lab.Config(true, []string{"slo-ttft=1s", "slo-tpot=1s", "goodput-requests=40", "goodput-loads=0.2,0.4"})
	if err != nil {
		t.Fatal(err)
	}
	el, err := newEngineLab(cfg.(*engineConfig), lab.Options{Seed: 1, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	// Nominal timings (they set the rates; the limits are the 1 s given)
	// and a cost model for the simulator's columns.
	el.step1 = 50e-6
	el.cost = serving.Cost{Overhead: 20e-6, PrefillToken: 16e-6, DecodeToken: 38e-6}
	r := reports.New("serving-engine", "goodput control")
	if err := el.goodput(context.Background(), r, 1.3e-3, 60e3); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range r.Checks {
		if strings.HasPrefix(c.Name, "continuous batching's goodput at least") {
			found = true
			if c.Pass {
				t.Errorf("check %q passed with limits no request misses: %s", c.Name, c.Detail)
			}
		}
	}
	if !found {
		t.Error("no goodput check in the report")
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "Goodput target, continuous batching at least 2x") }) {
		t.Errorf("no note on the 2x target in %q", r.Notes)
	}
	if g, ok := r.Metrics.Get("goodput_ratio_continuous_vs_fixed"); !ok || !(labtest.Float(g) < 1.5) {
		t.Errorf("goodput ratio with 1 s limits = %v (present %v), want about 1", g, ok)
	}
	if el.runs == 0 || len(el.leaks) > 0 {
		t.Errorf("%d runs, leaks %v", el.runs, el.leaks)
	}
}
