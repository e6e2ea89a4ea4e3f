package checkpoint

import (
	"context"
	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"testing"
)

// TestCheckpointLabQuick runs the lab on tiny with two budgets: every
// check passes (gradients bitwise for every policy and budget, the
// dynamic program against every subset and the exhaustive search, the
// negative controls), and the JSON metrics are there.
func TestCheckpointLabQuick(t *testing.T) {
	l := Lab
	cfg := l.Defaults().(*checkpointConfig)
	cfg.Configs, cfg.Budgets, cfg.Steps, cfg.Profile = []string{"tiny"}, 2, 1, 1
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	for _, k := range []string{"peak_bytes_none", "peak_bytes_sqrt", "peak_bytes_selective", "step_time_ratio_sqrt",
		"step_time_ratio_selective", "recompute_flops_share_sqrt", "grads_bitwise_equal"} {
		if !r.Metrics.Has(k) {
			t.Errorf("no metric %s", k)
		}
	}
}
