package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/models"
)

// TestGPTGradsEveryPolicy: with dropout on, gpt grads writes the same loss
// and gradients, to the bit, under every checkpointing policy and both
// mask generators' checkpointed runs; a budget below the smallest feasible
// peak is refused naming that minimum, and nothing is written.
func TestGPTGradsEveryPolicy(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 4)
	model := filepath.Join(dir, "m.safetensors")
	if err := p.SaveParams(model); err != nil {
		t.Fatal(err)
	}
	n := cfg.Batch * cfg.Block
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64((7*i + 3) % cfg.Vocab)
	}
	batch := filepath.Join(dir, "b.safetensors")
	bt := map[string]safetensors.Tensor{"idx": safetensors.Int("I64", []int{cfg.Batch, cfg.Block}, ids),
		"targets": safetensors.Int("I64", []int{cfg.Batch, cfg.Block}, slices.Concat(ids[1:], ids[:1]))}
	if err := safetensors.Write(batch, bt, nil); err != nil {
		t.Fatal(err)
	}
	grads := func(sets ...string) map[string]safetensors.Tensor {
		out := filepath.Join(dir, strings.NewReplacer(":", "_", "=", "_", ",", "_").Replace(strings.Join(sets, "_"))+".safetensors")
		args := []string{"--model", model, "--batch", batch, "--out", out, "--seed", "9", "--set", "dropout=0.1"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if err := runCmd("gpt grads", args...); err != nil {
			t.Fatalf("gpt grads %v: %v", sets, err)
		}
		ts, _, err := safetensors.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	for _, rng := range []string{"stateless", "stateful"} {
		want := grads("checkpoint=none", "rng="+rng)
		for _, pol := range []string{"every:1", "sqrt", "selective", "budget:0.8"} {
			got := grads("checkpoint="+pol, "rng="+rng)
			for name, w := range want {
				if !slices.Equal(got[name].F32, w.F32) {
					t.Errorf("rng=%s checkpoint=%s: %s differs from none's", rng, pol, name)
				}
			}
		}
	}
	if other := grads("checkpoint=none", "rng=stateless"); slices.Equal(other["loss"].F32, grads("checkpoint=none", "rng=stateful")["loss"].F32) {
		t.Error("stateless and stateful masks give the same loss: one of them is not dropout")
	}
	out := filepath.Join(dir, "tiny-budget.safetensors")
	err := runCmd("gpt grads", "--model", model, "--batch", batch, "--out", out, "--set", "checkpoint=budget:1KiB")
	if err == nil || !strings.Contains(err.Error(), "smallest feasible peak") {
		t.Errorf("budget:1KiB: %v, want an error naming the smallest feasible peak", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("budget:1KiB wrote its output")
	}
}
