package serving

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/reports"
	"gptlab/serving"
)

// TestServingHandTimeline checks the lab's example against its timeline
// worked out by hand. Cost: 10 ms an iteration + 1 ms a prefill token + 2
// ms a decode; 5 blocks of 4 tokens; A (prompt 6, output 4) at 0 ms, B (3,
// 3) at 5 ms, C (5, 2) at 20 ms; KV of a request is prompt + output - 1.
//
//  1. 0–16: only A has arrived; its 6 prompt tokens take 2 blocks;
//     10 + 6 = 16 ms. A's first token at 16.
//  2. 16–31: A decodes position 6 (still in its 2 blocks); B (arrived at
//  5. is admitted, 3 tokens in 1 block; 10 + 3 + 2 = 15 ms. 3 blocks.
//  3. 31–50: A decodes 7, B decodes 3 (both within their blocks); C (at
//  20. is admitted, 5 tokens in 2 blocks: all 5 used; 10 + 5 + 2·2 = 19.
//  4. 50–64: A's position 8 needs a third block and none is free: the
//     most recently admitted, C, is preempted and its 2 blocks freed; A
//     takes one, B (position 4) the other; no admission in an iteration
//     that preempted; 10 + 2·2 = 14. A's 4th and B's 3rd token: both done.
//  5. 64–80: C comes back and recomputes its prompt and its first token,
//     6 tokens in 2 blocks; 10 + 6 = 16. C's 2nd token: done.
func TestServingHandTimeline(t *testing.T) {
	res, err := servingHand(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	type entry struct{ req, start, n int }
	want := []struct {
		start, end float64 // ms
		entries    []entry // all sample: every entry ends at its last known token
		blocks     int
		preempted  []int
		finished   []int
	}{
		{0, 16, []entry{{0, 0, 6}}, 2, nil, nil},
		{16, 31, []entry{{0, 6, 1}, {1, 0, 3}}, 3, nil, nil},
		{31, 50, []entry{{0, 7, 1}, {1, 3, 1}, {2, 0, 5}}, 5, nil, nil},
		{50, 64, []entry{{0, 8, 1}, {1, 4, 1}}, 5, []int{2}, []int{0, 1}},
		{64, 80, []entry{{2, 0, 6}}, 2, nil, []int{2}},
	}
	if len(res.Timeline) != len(want) {
		t.Fatalf("%d iterations, want %d", len(res.Timeline), len(want))
	}
	for i, w := range want {
		it := res.Timeline[i]
		if math.Abs(1e3*it.Start-w.start) > 1e-9 || math.Abs(1e3*it.End-w.end) > 1e-9 {
			t.Errorf("iteration %d: %.3f–%.3f ms, want %g–%g", i+1, 1e3*it.Start, 1e3*it.End, w.start, w.end)
		}
		var got []entry
		for _, e := range it.Entries {
			if !e.Sample {
				t.Errorf("iteration %d: entry %+v does not sample", i+1, e)
			}
			got = append(got, entry{e.Req, e.Start, e.N})
		}
		if !slices.Equal(got, w.entries) || it.UsedBlocks != w.blocks || !slices.Equal(it.Preempted, w.preempted) || !slices.Equal(it.Finished, w.finished) {
			t.Errorf("iteration %d: entries %v, %d blocks, preempted %v, finished %v; want %v, %d, %v, %v",
				i+1, got, it.UsedBlocks, it.Preempted, it.Finished, w.entries, w.blocks, w.preempted, w.finished)
		}
	}
	// TTFT A 16, B 31-5 = 26, C 50-20 = 30; E2E 64, 59, 60; TPOT (64-16)/3 = 16,
	// (59-26)/2 = 16.5, 30/1 = 30; gaps A 15 19 14, B 19 14, C 30.
	s := res.Rec.Summary(serving.SLO{TTFT: 0.028, TPOT: 0.020})
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"TTFT mean", s.TTFT.Mean, 24e-3}, {"E2E mean", s.E2E.Mean, 61e-3}, {"TPOT mean", s.TPOT.Mean, (16 + 16.5 + 30) / 3e3},
		{"ITL mean", s.ITL.Mean, 18.5e-3}, {"ITL median", s.ITL.Median, 17e-3}, {"duration", s.Duration, 80e-3},
		{"goodput", s.Goodput, 2 / 80e-3}, // A and B meet TTFT ≤ 28 ms and TPOT ≤ 20 ms; C does not
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %.6g, want %.6g", c.name, c.got, c.want)
		}
	}
}

func runServingForTest(t *testing.T, sets ...string) (*reports.Report, error) {
	t.Helper()
	l := Lab
	cfg, err := l.Config(true, sets)
	if err != nil {
		return nil, err
	}
	return l.Run(context.Background(), cfg, lab.Options{Seed: 1})
}

// TestServingChecked runs a small configuration with the invariant checker
// after every iteration of every run.
func TestServingChecked(t *testing.T) {
	r, err := runServingForTest(t, "check=true", "requests=120", "rates=1,6", "batches=16", "sim-requests=1000")
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	for _, k := range []string{"goodput_ratio_continuous_vs_fixed", "kv_waste_paged_ratio", "kv_waste_contiguous_ratio", "prefix_cache_hit_ratio", "sim_requests_per_s"} {
		if v, ok := r.Metrics.Get(k); !ok || !(labtest.Float(v) > 0) {
			t.Errorf("metric %s = %v, want a positive value", k, v)
		}
	}
	if len(r.FigureList()) != 3 {
		t.Errorf("%d figures, want the goodput, latency CDF and KV-use figures", len(r.FigureList()))
	}
	if got, _ := r.Config.Get("requests"); labtest.Float(got) != 120 {
		t.Errorf("config requests = %v, want the 120 that ran", got)
	}
}

func TestServingTrace(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "trace.csv")
	var b strings.Builder
	b.WriteString("arrival_s,prompt_tokens,output_tokens,cancel_s\n")
	for i := range 40 {
		cancel := ""
		if i%10 == 3 {
			cancel = "30"
		}
		b.WriteString(strings.Join([]string{strconv.FormatFloat(0.3*float64(i), 'g', -1, 64), strconv.Itoa(20 + 13*i%200), strconv.Itoa(5 + 7*i%90), cancel}, ",") + "\n")
	}
	b.WriteString("1,100000,5\n") // a request no budget holds: rejected, not an error
	if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runServingForTest(t, "trace="+good, "requests=100", "rates=2", "batches=16", "sim-requests=1000")
	if err != nil {
		t.Fatal(err)
	}
	var tb *reports.Table
	for _, x := range r.Tables {
		if strings.HasPrefix(x.Title, "The trace") {
			tb = x
		}
	}
	if tb == nil || len(tb.Rows) != 2 {
		t.Fatalf("trace table %v: want fixed and continuous on the one budget", tb)
	}
	if rejected := tb.Rows[1][3]; labtest.Float(rejected) != 1 {
		t.Errorf("continuous rejected %v requests of the trace, want 1", rejected)
	}
	labtest.ChecksHold(t, r, "with a trace: ")

	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("0,10,5\n0.5,ten,5\n"), 0o644)
	_, err = runServingForTest(t, "trace="+bad)
	if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("bad trace: %v; want one usage line naming line 2", err)
	}
}

func TestServingRejectsBadSettings(t *testing.T) {
	for _, set := range []string{"prompt=normal:3", "output=fixed:0", "rates=0", "budgets=1", "batches=", "block-size=0",
		"slo-ttft=0s", "cv=0", "max-len=100", "requests=5", "cancel-frac=2", "trace=/nonexistent/trace.csv",
		"budgets=100000,1024", "sim-requests=100000000"} {
		if _, err := runServingForTest(t, "block-size=1024", set); !errors.Is(err, lab.ErrUsage) {
			t.Errorf("--set %s: %v, want a usage error", set, err)
		}
	}
}
