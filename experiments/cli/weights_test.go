package cli

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
)

// trainedDir trains tiny for two steps into a fresh --out directory.
func trainedDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, errs := runMain("gpt", "train", "--set", "iters=4", "--set", "warmup=1", "--set", "eval-every=2",
		"--set", "eval-batches=1", "--set", "sample-chars=0", "--steps", "2", "--out", dir); code > 1 {
		t.Fatalf("gpt train: exit %d, %s", code, errs)
	}
	return dir
}

// tokenBatch writes a one-row batch of tokens 0..3.
func tokenBatch(t *testing.T, path string) {
	t.Helper()
	b := map[string]safetensors.Tensor{
		"idx":     safetensors.Int("I64", []int{1, 4}, []int64{0, 1, 2, 3}),
		"targets": safetensors.Int("I64", []int{1, 4}, []int64{1, 2, 3, 0}),
	}
	if err := safetensors.Write(path, b, nil); err != nil {
		t.Fatal(err)
	}
}

// refusedInOneLine fails t unless the command exits 2 with one line on stderr
// holding every one of words.
func refusedInOneLine(t *testing.T, args []string, words ...string) string {
	t.Helper()
	code, _, errs := runMain(args...)
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, code, errs)
	}
	for _, w := range words {
		if !strings.Contains(errs, w) {
			t.Errorf("%q: stderr %q does not mention %q", args, errs, w)
		}
	}
	return errs
}

// TestGPTRefusesNonFiniteWeights: a checkpoint whose weights hold a NaN is
// refused with exit 2 and one line naming the file, the tensor and the
// index, by every command that loads weights. gpt sample once printed
// "vvvvvvvvvvvvvvvvvvvv" from it and exited 0, gpt eval exited 1.
func TestGPTRefusesNonFiniteWeights(t *testing.T) {
	dir := trainedDir(t)
	const name = "transformer.h.1.mlp.c_proj.weight"
	poison := func(src, dst string) {
		ts, meta, err := safetensors.Read(filepath.Join(dir, src))
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts[name].F32 {
			ts[name].F32[i] = float32(math.NaN())
		}
		if err := safetensors.Write(dst, ts, meta); err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "model.safetensors")
	poison("model.safetensors", bad)
	badParams := filepath.Join(t.TempDir(), "params.safetensors")
	poison("params.safetensors", badParams)
	batch := filepath.Join(t.TempDir(), "batch.safetensors")
	tokenBatch(t, batch)
	words := []string{name, "non-finite value NaN at index 0"}
	for _, args := range [][]string{
		{"gpt", "sample", "--model", bad, "--tokens", "20"},
		{"gpt", "eval", "--model", bad},
		{"gpt", "train", "--resume", bad, "--out", filepath.Join(t.TempDir(), "more")},
		{"gpt", "grads", "--model", bad, "--batch", batch, "--out", filepath.Join(t.TempDir(), "g.safetensors")},
		{"gpt", "grads", "--model", badParams, "--batch", batch, "--out", filepath.Join(t.TempDir(), "g.safetensors")},
	} {
		t.Logf("%s: %s", args[1], strings.TrimSpace(refusedInOneLine(t, args, append(words, args[3])...)))
	}
	// control: the clean checkpoint samples.
	if code, _, errs := runMain("gpt", "sample", "--model", filepath.Join(dir, "model.safetensors"), "--tokens", "20"); code != 0 {
		t.Errorf("gpt sample on the clean checkpoint: exit %d, %s", code, errs)
	}
}

// TestGPTWeightFiles: gpt train --out writes model.safetensors (the
// training checkpoint) and params.safetensors (the parameters alone).
// gpt grads reads either (it once refused the checkpoint with "unexpected
// tensor adamw.m"); gpt eval, sample and train --resume need the
// checkpoint's vocabulary and data, and given the parameters file say in
// one line to pass model.safetensors (they once said `format ""`).
func TestGPTWeightFiles(t *testing.T) {
	dir := trainedDir(t)
	ckpt, params := filepath.Join(dir, "model.safetensors"), filepath.Join(dir, "params.safetensors")
	batch := filepath.Join(t.TempDir(), "batch.safetensors")
	tokenBatch(t, batch)
	var outs []string
	for _, m := range []string{ckpt, params} {
		out := filepath.Join(t.TempDir(), "g.safetensors")
		if code, _, errs := runMain("gpt", "grads", "--model", m, "--batch", batch, "--out", out); code != 0 {
			t.Fatalf("gpt grads --model %s: exit %d, %s", filepath.Base(m), code, errs)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(b))
	}
	if outs[0] != outs[1] {
		t.Error("gpt grads gives other gradients from model.safetensors than from params.safetensors")
	}
	for _, args := range [][]string{
		{"gpt", "sample", "--model", params, "--tokens", "20"},
		{"gpt", "eval", "--model", params},
		{"gpt", "train", "--resume", params, "--out", filepath.Join(t.TempDir(), "more")},
	} {
		t.Logf("%s: %s", args[1], strings.TrimSpace(refusedInOneLine(t, args, params, "parameters alone", ckpt)))
	}
}
