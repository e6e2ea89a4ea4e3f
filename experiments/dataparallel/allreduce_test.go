package dataparallel

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// OpenMPI's sweep reaches the comparison through its JSON report: what
// allreduceReport writes, parseSweep must read back with the same
// numbers. (A typed duration column once made every OpenMPI row
// unreadable, and the comparison silently fell out of the bench.)
func TestSweepSurvivesJSON(t *testing.T) {
	want := &Sweep{name: "mpi", ranks: 2, wrong: 1, rows: []sweepRow{
		{bytes: 4 << 10, iters: 990, median: 3400 * time.Nanosecond, min: 3100 * time.Nanosecond, sent: math.NaN()},
		{bytes: 16 << 20, iters: 30, median: 4100 * time.Microsecond, min: 3900 * time.Microsecond, sent: math.NaN()},
	}}
	cfg := AllreduceConfig{Transport: "mpi", MinBytes: 4 << 10, MaxBytes: 16 << 20, MPI: "off"}
	var buf bytes.Buffer
	if err := AllreduceReport([]*Sweep{want}, cfg, "", nil).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := parseSweep(buf.Bytes())
	if err != nil {
		t.Fatalf("parseSweep of allreduceReport's JSON: %v", err)
	}
	if got.ranks != want.ranks || got.wrong != want.wrong || len(got.rows) != len(want.rows) {
		t.Fatalf("got ranks %d wrong %d rows %d, want %d %d %d", got.ranks, got.wrong, len(got.rows), want.ranks, want.wrong, len(want.rows))
	}
	for i, w := range want.rows {
		g := got.rows[i]
		if g.bytes != w.bytes || g.iters != w.iters || g.median != w.median || g.min != w.min {
			t.Errorf("row %d: got %+v, want %+v", i, g, w)
		}
	}
	// Negative control: a report without the sweep table is refused.
	if _, err := parseSweep([]byte(`{"tables": []}`)); err == nil {
		t.Error("a report without a sweep table parsed")
	}
}
