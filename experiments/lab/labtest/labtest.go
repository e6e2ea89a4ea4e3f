// Package labtest holds what the labs' tests share: running a lab as the
// command line would (its --quick and --set applied), and asserting a
// report's checks. It is imported by tests only; it owns no lab.
package labtest

import (
	"context"
	"io"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// Run runs l with seed 1 on its defaults, shrunk by --quick when quick is
// set, then overridden by sets, as `gptlab run` does.
func Run(l *lab.Lab, quick bool, sets ...string) (*reports.Report, error) {
	cfg, err := l.Config(quick, sets)
	if err != nil {
		return nil, err
	}
	return l.Run(context.Background(), cfg, lab.Options{Seed: 1, Log: io.Discard})
}

// ChecksHold fails t for every failed check of r that is not timed and
// logs the timed ones that missed: those depend on the machine's load
// (tests run beside each other on shared machines), and speed is for
// the benchmarks and the gate to judge (reports.Check.Timed).
func ChecksHold(t testing.TB, r *reports.Report, prefix string) {
	t.Helper()
	for _, c := range r.Checks {
		switch {
		case c.Pass:
		case c.Timed:
			t.Logf("%stimed check %q missed on this machine: %s", prefix, c.Name, c.Detail)
		default:
			t.Errorf("%scheck %q failed: %s", prefix, c.Name, c.Detail)
		}
	}
}

// Float is a report's metric or cell value as a float64 (-1 for anything
// else).
func Float(x any) float64 {
	switch v := x.(type) {
	case int64:
		return float64(v)
	case int:
		return float64(v)
	case float64:
		return v
	}
	return -1
}
