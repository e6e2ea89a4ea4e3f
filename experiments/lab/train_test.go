package lab

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/models"
)

// TestTrainCheckpointedSameLosses: the checkpoint setting gives the same
// losses to the bit under every precision policy, with dropout: the
// recomputation and the casts are passes over one graph and compose.
func TestTrainCheckpointedSameLosses(t *testing.T) {
	run := func(prec, policy string) []float32 {
		c := Train{Config: "tiny", Iters: 6, LR: 1e-2, Warmup: 2, Dropout: 0.1, Beta2: 0.95, EvalEvery: 3, EvalBatches: 2}
		if err := ApplySets(&c, []string{"precision=" + prec, "checkpoint=" + policy}); err != nil {
			t.Fatal(err)
		}
		tc, data, err := c.Setup(2)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := models.NewTrainer(tc, data)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if err := tr.Run(context.Background(), tc.Iters, nil); err != nil {
			t.Fatal(err)
		}
		return tr.Losses
	}
	precs, pols := []string{"f32", "bf16", "fp16"}, []string{"every:1", "sqrt", "selective"}
	if testutil.Trimmed() { // emulated -short: 4 runs, not 12 (natively all; fp16's and sqrt's steps: models' tests)
		precs, pols = []string{"f32", "bf16"}, []string{"selective"}
	}
	for _, prec := range precs {
		want := run(prec, "none")
		for _, pol := range pols {
			if got := run(prec, pol); !slices.Equal(got, want) {
				t.Errorf("precision=%s checkpoint=%s: losses %v, none's %v", prec, pol, got, want)
			}
		}
	}
	// Negative control: another policy changes the losses, so equality
	// above is not the comparison of a run with itself.
	if f32, bf16 := run("f32", "none"), run("bf16", "none"); slices.Equal(f32, bf16) {
		t.Errorf("f32 and bf16 give the same losses %v: the precision setting did not reach the trainer", f32)
	}
}

// TestWarmupAdapts: the default warmup adapts to a short run (a tenth of
// iters, at most DefaultWarmup) and the settings show the number used;
// only a warmup set longer than the run is refused (--set iters=20 was
// once refused for the default's 100).
func TestWarmupAdapts(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want int
	}{
		{[]string{"iters=20"}, 2},
		{[]string{"iters=5"}, 0},
		{[]string{"iters=2000"}, DefaultWarmup},
		{[]string{"iters=20", "warmup=7"}, 7},
	} {
		c := Train{Config: "tiny", LR: 1e-3, Beta2: 0.95, EvalBatches: 1}
		if err := ApplySets(&c, tc.sets); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Setup(1); err != nil || c.Warmup != tc.want {
			t.Errorf("--set %v: warmup %d, %v; want %d and no error", tc.sets, c.Warmup, err, tc.want)
		}
	}
	c := Train{Config: "tiny", LR: 1e-3, Beta2: 0.95, EvalBatches: 1}
	if err := ApplySets(&c, []string{"iters=20", "warmup=30"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Setup(1); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "warmup=30") {
		t.Errorf("--set iters=20 warmup=30: %v, want bad usage naming warmup=30", err)
	}
}
