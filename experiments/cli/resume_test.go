package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestResumeRefusesSeed: --seed beside --resume is refused, as --set is
// (the checkpoint holds the settings and the seed); it was once ignored
// silently, the run going on with the checkpoint's seed.
func TestResumeRefusesSeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, errs := runMain("gpt", "train", "--set", "iters=4", "--set", "warmup=1", "--set", "eval-every=2",
		"--set", "eval-batches=1", "--set", "sample-chars=0", "--steps", "2", "--out", dir); code > 1 { // 1: a 2-step run's loss checks

		t.Fatalf("gpt train: exit %d, %s", code, errs)
	}
	ck := filepath.Join(dir, "model.safetensors")
	code, _, errs := runMain("gpt", "train", "--resume", ck, "--seed", "5", "--out", filepath.Join(t.TempDir(), "more"))
	if code != 2 || !strings.Contains(errs, "--seed") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("gpt train --resume --seed 5: exit %d, stderr %q; want 2 and one line naming --seed", code, errs)
	}
	// Without --seed the same resume runs (the negative control).
	if code, _, errs := runMain("gpt", "train", "--resume", ck, "--out", filepath.Join(t.TempDir(), "more")); code > 1 {
		t.Errorf("gpt train --resume: exit %d, %s", code, errs)
	}
}
