package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/internal/safetensors"
	"gptlab/internal/testutil"
)

// goldenDir is a case written by gpt_reference.py golden, kept in the
// models package's testdata.
const goldenDir = "../../models/testdata/golden/odd-1layer-4heads"

// writeBatch writes idx and targets of the golden case as dtype.
func writeBatch(t *testing.T, path, dtype string, c map[string]safetensors.Tensor) {
	t.Helper()
	b := map[string]safetensors.Tensor{
		"idx":     safetensors.Int(dtype, c["idx"].Shape, c["idx"].Ints),
		"targets": safetensors.Int(dtype, c["targets"].Shape, c["targets"].Ints),
	}
	if err := safetensors.Write(path, b, nil); err != nil {
		t.Fatal(err)
	}
}

func TestGPTGradsMatchesReference(t *testing.T) {
	want, _, err := safetensors.Read(filepath.Join(goldenDir, "case.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dtype := range []string{"I64", "I32"} {
		t.Run(dtype, func(t *testing.T) {
			dir := t.TempDir()
			batch, out := filepath.Join(dir, "b.safetensors"), filepath.Join(dir, "o.safetensors")
			writeBatch(t, batch, dtype, want)
			args := []string{"--model", filepath.Join(goldenDir, "model.safetensors"), "--batch", batch, "--out", out, "--adamw-steps", "3"}
			if err := runCmd("gpt grads", args...); err != nil {
				t.Fatal(err)
			}
			got, _, err := safetensors.Read(out)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for name, w := range want {
				if w.DType != "F32" {
					continue
				}
				g, ok := got[name]
				if !ok {
					t.Errorf("output lacks %q", name)
					continue
				}
				tol := 1e-4
				if strings.HasPrefix(name, "after.") || name == "adamw.losses" {
					tol = 1e-5
				}
				if d := testutil.MaxAbsDiff(g.F32, w.F32); d > tol || !equal(g.Shape, w.Shape) {
					t.Errorf("%s: shape %v (want %v), max abs diff %g > %g", name, g.Shape, w.Shape, d, tol)
				}
				n++
			}
			if len(got) != len(want) {
				t.Errorf("output has %d tensors, the reference case %d", len(got), len(want))
			}
			if n < 30 {
				t.Errorf("compared only %d tensors", n)
			}
		})
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGPTGradsBadInput(t *testing.T) {
	dir := t.TempDir()
	want, _, err := safetensors.Read(filepath.Join(goldenDir, "case.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.safetensors")
	writeBatch(t, good, "I64", want)
	floatBatch := filepath.Join(dir, "float.safetensors")
	if err := safetensors.Write(floatBatch, map[string]safetensors.Tensor{
		"idx":     safetensors.F32([]int{1, 2}, []float32{0, 1}),
		"targets": safetensors.F32([]int{1, 2}, []float32{0, 1}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	outOfVocab := filepath.Join(dir, "oov.safetensors")
	if err := safetensors.Write(outOfVocab, map[string]safetensors.Tensor{
		"idx":     safetensors.Int("I64", []int{1, 2}, []int64{0, 33}),
		"targets": safetensors.Int("I64", []int{1, 2}, []int64{0, 1}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(goldenDir, "model.safetensors")
	out := filepath.Join(dir, "out.safetensors")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"--batch", good, "--out", out}, "--model"},
		{"no out", []string{"--model", model, "--batch", good}, "--out"},
		{"negative steps", []string{"--model", model, "--batch", good, "--out", out, "--adamw-steps", "-1"}, "adamw-steps"},
		{"unknown flag", []string{"--modle", model}, "modle"},
		{"model is a batch", []string{"--model", good, "--batch", good, "--out", out}, "--model"},
		{"float batch", []string{"--model", model, "--batch", floatBatch, "--out", out}, "dtype F32"},
		{"token outside vocab", []string{"--model", model, "--batch", outOfVocab, "--out", out}, "33"},
		{"missing batch file", []string{"--model", model, "--batch", filepath.Join(dir, "nope"), "--out", out}, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runCmd("gpt grads", tc.args...)
			if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gptGrads(%v) = %v, want lab.ErrUsage mentioning %q", tc.args, err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("output written despite the error")
			}
		})
	}
}
