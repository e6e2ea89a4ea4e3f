package tensorparallel

import (
	"context"
	"fmt"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
)

// TestTensorParallelLab runs the lab's quick form on its own (it launches
// two ranks of this binary) and on four ranks over TCP: every check holds
// (small's 4 heads split over 4; the split linear layers and the Megatron block equal the unsplit ones,
// the bias on every rank is caught, the block's bytes are Megatron's).
func TestTensorParallelLab(t *testing.T) {
	l := Lab
	for _, tc := range []struct {
		ranks     int
		transport string
		config    string
	}{{2, "auto", "tiny"}, {4, "tcp", "small"}} {
		c, err := l.Config(true, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.(*tensorParallelConfig)
		cfg.Ranks, cfg.Transport, cfg.Config = tc.ranks, tc.transport, tc.config
		r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Checks) < 5 {
			t.Errorf("%d ranks: %d checks, want 5", tc.ranks, len(r.Checks))
		}
		labtest.ChecksHold(t, r, fmt.Sprintf("%d ranks over %s: ", tc.ranks, tc.transport))
	}
	cfg := l.Defaults().(*tensorParallelConfig)
	cfg.Ranks = 3
	if _, err := l.Run(context.Background(), cfg, lab.Options{Seed: 3}); err == nil {
		t.Error("small's 4 heads over 3 ranks: no error")
	}
}
