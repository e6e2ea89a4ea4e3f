package cli

import (
	"testing"

	"gptlab/experiments/lab/labtest"
	"gptlab/reports"
)

// TestDataParallelQuick: the lab's --quick run, launched as processes by
// the exit gate, passes every check and reports the metrics.
func TestDataParallelQuick(t *testing.T) {
	var r *reports.Report
	for _, x := range quickGateReport(t).Reports {
		if x.Lab == "data-parallel" {
			r = x
		}
	}
	if r == nil {
		t.Fatal("the exit gate ran no data-parallel report")
	}
	labtest.ChecksHold(t, r, "")
	for _, key := range []string{"max_rel_diff_equal", "max_rel_diff_unequal", "bytes_sent_per_rank", "model_bytes_per_rank",
		"optimizer_state_bytes_per_rank_zero1", "optimizer_state_bytes_per_rank_dp", "step_ms_overlap", "step_ms_no_overlap"} {
		if _, ok := r.Metrics.Get(key); !ok {
			t.Errorf("metric %s missing", key)
		}
	}
	// The all-reduce timed by size on the lab's ranks (the bench's sweep).
	for _, key := range []string{"allreduce_4kib_us", "allreduce_16mib_ms"} {
		if v, ok := r.Metrics.Get(key); !ok || !(v.(float64) > 0) {
			t.Errorf("metric %s = %v, want a positive time", key, v)
		}
	}
}
