package checkpoint

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
)

// TestCheckpointLabQuick runs the lab on tiny with two budgets, and every
// policy again under bf16: every check passes (gradients bitwise for every
// policy and budget, under f32 and under bf16, the dynamic program against
// every subset and the exhaustive search, the negative controls), and the
// JSON metrics are there.
func TestCheckpointLabQuick(t *testing.T) {
	l := Lab
	cfg := l.Defaults().(*checkpointConfig)
	cfg.Configs, cfg.Budgets, cfg.Steps, cfg.Profile, cfg.PrecisionShapes = []string{"tiny"}, 2, 1, 1, []string{"tiny"}
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	for _, k := range []string{"peak_bytes_none", "peak_bytes_sqrt", "peak_bytes_selective", "step_time_ratio_sqrt",
		"step_time_ratio_selective", "recompute_flops_share_sqrt", "grads_bitwise_equal",
		"tiny_peak_bytes_bf16_none", "tiny_peak_bytes_bf16_sqrt", "tiny_step_time_ratio_bf16_selective"} {
		if !r.Metrics.Has(k) {
			t.Errorf("no metric %s", k)
		}
	}
	var mixedCheck bool
	for _, c := range r.Checks {
		mixedCheck = mixedCheck || strings.Contains(c.Name, "tiny under bf16: every policy's gradients")
	}
	if !mixedCheck {
		t.Error("no check of the bf16 rows' gradients")
	}
}

// TestCheckpointPrecisionSettings: the bf16 rows are for shapes the lab
// runs, under a 16-bit policy.
func TestCheckpointPrecisionSettings(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"configs=tiny", "precision-shapes=small"}, "precision-shapes=small"},
		{[]string{"configs=tiny", "precision-shapes=tiny", "precision=f32"}, "precision=f32"},
		{[]string{"precision=fp9"}, "want one of"},
	} {
		_, err := labtest.Run(Lab, true, tc.sets...)
		if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--set %v: %v, want bad usage naming %q", tc.sets, err, tc.want)
		}
	}
}
