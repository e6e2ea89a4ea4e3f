package servingengine

import (
	"errors"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/internal/testutil"
)

// TestLabQuick runs the lab small (no PyTorch) and holds its checks that
// are not timings: greedy and preemption equality, invariants, blocks
// free after every run; and the metrics the issue names are there.
func TestLabQuick(t *testing.T) {
	sets := []string{"requests=30", "batches=1,32", "torch=0", "contexts=8", "chunks=32", "goodput-requests=40"}
	if testutil.Trimmed() { // emulated -short: the small model, 10 requests, 15 tokens a sequence (natively baby, 30, 63);
		// one latency run a rate, goodput runs of 12 requests at two loads (natively 3 runs a rate, 40 requests at three)
		sets = append(sets, "model=small", "requests=10", "tokens=15", "latency-repeats=1",
			"goodput-requests=12", "goodput-loads=0.25,0.5")
	}
	r, err := labtest.Run(Lab, true, sets...)
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	for _, name := range []string{"decode_tokens_per_s_b1", "decode_tokens_per_s_b32", "prefill_tokens_per_s",
		"sim_ttft_p50_error_ratio", "sim_ttft_p90_error_ratio", "sim_tpot_p50_error_ratio", "sim_tpot_p90_error_ratio"} {
		v, ok := r.Metrics.Get(name)
		if !ok || !(labtest.Float(v) > 0) {
			t.Errorf("metric %s = %v (present %v)", name, v, ok)
		}
	}
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
	}
	for _, want := range []string{"invariants held", "blocks free after every run", "a preempted request resumes to the same tokens: tiny pool, swap"} {
		if !names[want] {
			t.Errorf("no check %q", want)
		}
	}
}

func TestLabBadInput(t *testing.T) {
	for _, set := range []string{"model=huge", "batches=0", "prompt=60", "loads=0.5,0.2,0.9", "prompt-lens=uniform:4:60", "threads=0", "weights=int4", "goodput-loads=0.5"} {
		if _, err := labtest.Run(Lab, true, set); !errors.Is(err, lab.ErrUsage) {
			t.Errorf("--set %s: %v, want a usage error", set, err)
		}
	}
}
