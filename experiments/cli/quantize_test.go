package cli

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/models"
)

// checkpointForQuantize trains tiny for 40 steps and returns its
// training checkpoint.
func checkpointForQuantize(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	code, _, errs := runMain("gpt", "train", "--out", dir, "--set", "config=tiny", "--set", "iters=40", "--set", "eval-every=40",
		"--set", "eval-batches=4", "--set", "sample-chars=0", "--format", "json")
	if code > 1 {
		t.Fatalf("gpt train: status %d: %s", code, errs)
	}
	return filepath.Join(dir, "model.safetensors")
}

// TestGPTQuantizeEvalSample: gpt quantize writes an int8 checkpoint
// (codes I8, scales F32, scheme and rounding in the metadata); gpt eval
// reads it, says it runs int8, and its validation loss is within 1% of
// the float32 checkpoint's on the same batches (and not bitwise it: the
// weights changed); gpt sample reads it, says so on stderr, and is
// reproducible from its seed.
func TestGPTQuantizeEvalSample(t *testing.T) {
	ckpt := checkpointForQuantize(t)
	dir := t.TempDir()
	for _, scheme := range []string{"channel", "tensor", "block32"} {
		q := filepath.Join(dir, scheme+".safetensors")
		code, out, errs := runMain("gpt", "quantize", "--model", ckpt, "--out", q, "--set", "scheme="+scheme, "--format", "json")
		if code != 0 {
			t.Fatalf("gpt quantize %s: status %d: %s%s", scheme, code, errs, out)
		}
		m := jsonMetrics(t, out)
		if f, i := m["linear_weight_bytes_f32"].(float64), m["linear_weight_bytes_int8"].(float64); !(i < f/3.5) {
			t.Errorf("%s: linear weights %v → %v bytes", scheme, f, i)
		}
		ts, meta, err := safetensors.Read(q)
		if err != nil {
			t.Fatal(err)
		}
		if meta["quant_scheme"] != scheme || meta["quant_rounding"] != "nearest-even" || ts["transformer.h.0.attn.c_attn.weight"].DType != "I8" ||
			ts["transformer.h.0.attn.c_attn.weight.scales"].DType != "F32" {
			t.Errorf("%s: metadata %v", scheme, meta)
		}
		code, out, errs = runMain("gpt", "eval", "--model", q, "--format", "json")
		if code != 0 {
			t.Fatalf("gpt eval of int8: status %d: %s", code, errs)
		}
		if !strings.Contains(out, `"weights":"int8"`) && !strings.Contains(out, `"weights": "int8"`) {
			t.Errorf("gpt eval of int8 does not say it runs int8: %s", out)
		}
		i8 := jsonMetrics(t, out)["val_loss_nats"].(float64)
		code, out, errs = runMain("gpt", "eval", "--model", ckpt, "--format", "json")
		if code != 0 {
			t.Fatalf("gpt eval: status %d: %s", code, errs)
		}
		f32 := jsonMetrics(t, out)["val_loss_nats"].(float64)
		if d := math.Abs(i8-f32) / f32; d > 0.01 || d == 0 {
			t.Errorf("%s: int8 val loss %v against float32's %v (%.2g relative), want within 1%% and not equal", scheme, i8, f32, d)
		}
		var texts []string
		for range 2 {
			code, out, errs = runMain("gpt", "sample", "--model", q, "--tokens", "40", "--seed", "3")
			if code != 0 {
				t.Fatalf("gpt sample of int8: status %d: %s", code, errs)
			}
			if !strings.Contains(errs, "int8 model") {
				t.Errorf("gpt sample does not say it runs int8: stderr %q", errs)
			}
			texts = append(texts, out)
		}
		if texts[0] != texts[1] || len([]rune(strings.TrimSpace(texts[0]))) < 30 {
			t.Errorf("%s: samples %q and %q: want the same 40 characters", scheme, texts[0], texts[1])
		}
	}
}

// TestQuantizeBadInputs: an int8 checkpoint handed to gpt quantize, an
// unknown scheme, a non-finite weight, and int8 files whose scales are
// missing, mis-shaped or non-finite or whose codes are mis-shaped, given
// to gpt eval and gpt sample: exit 2, one line naming the tensor (or the
// setting) and what is wrong, nothing written.
func TestQuantizeBadInputs(t *testing.T) {
	ckpt := checkpointForQuantize(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	if code, _, errs := runMain("gpt", "quantize", "--model", ckpt, "--out", good); code != 0 {
		t.Fatalf("gpt quantize: %d %s", code, errs)
	}
	const w = "transformer.h.1.mlp.c_fc.weight"
	// edited writes a copy of file with one change.
	edited := func(name, file string, edit func(ts map[string]safetensors.Tensor, meta map[string]string)) string {
		ts, meta, err := safetensors.Read(file)
		if err != nil {
			t.Fatal(err)
		}
		edit(ts, meta)
		var buf bytes.Buffer
		if err := safetensors.Encode(&buf, ts, meta); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".safetensors")
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nanWeight := edited("nan-weight", ckpt, func(ts map[string]safetensors.Tensor, _ map[string]string) { ts[w].F32[70] = float32(math.NaN()) })
	noScales := edited("no-scales", good, func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, w+".scales") })
	badScales := edited("bad-scales", good, func(ts map[string]safetensors.Tensor, _ map[string]string) {
		ts[w+".scales"] = safetensors.F32([]int{2, 64}, make([]float32, 128))
	})
	infScale := edited("inf-scale", good, func(ts map[string]safetensors.Tensor, _ map[string]string) {
		ts[w+".scales"].F32[9] = float32(math.Inf(1))
	})
	badCodes := edited("bad-codes", good, func(ts map[string]safetensors.Tensor, _ map[string]string) {
		ts[w] = safetensors.I8([]int{64, 64}, make([]int8, 64*64))
	})
	out := filepath.Join(dir, "out.safetensors")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"quantize twice", []string{"gpt", "quantize", "--model", good, "--out", out}, "already quantized"},
		{"unknown scheme", []string{"gpt", "quantize", "--model", ckpt, "--out", out, "--set", "scheme=row"}, `scheme=row`},
		{"unknown head", []string{"gpt", "quantize", "--model", ckpt, "--out", out, "--set", "head=bf16"}, "head=bf16"},
		{"non-finite weight", []string{"gpt", "quantize", "--model", nanWeight, "--out", out}, `"` + w + `": non-finite value NaN at index 70 (element [2 6]`},
		{"out is the model", []string{"gpt", "quantize", "--model", ckpt, "--out", ckpt}, "is the --model file"},
		{"no model", []string{"gpt", "quantize", "--out", out}, "--model is required"},
		{"no out", []string{"gpt", "quantize", "--model", ckpt}, "--out is required"},
		{"eval scales missing", []string{"gpt", "eval", "--model", noScales}, `scales "` + w + `.scales" of int8 tensor "` + w + `" missing`},
		{"sample scales missing", []string{"gpt", "sample", "--model", noScales}, `"` + w + `" missing`},
		{"eval scales mis-shaped", []string{"gpt", "eval", "--model", badScales}, `scales "` + w + `.scales" have dtype F32 shape [2 64], want F32 shape [128]`},
		{"eval scale non-finite", []string{"gpt", "eval", "--model", infScale}, w + ": scale 9 is non-finite value +Inf"},
		{"sample scale non-finite", []string{"gpt", "sample", "--model", infScale}, w + ": scale 9 is non-finite"},
		{"eval codes mis-shaped", []string{"gpt", "eval", "--model", badCodes}, `int8 tensor "` + w + `" has shape [64 64], want [128 32]`},
		{"sample codes mis-shaped", []string{"gpt", "sample", "--model", badCodes}, `has shape [64 64], want [128 32]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runMain(tc.args...)
			if code != 2 {
				t.Fatalf("Main(%q) = %d, want 2; stderr %q", tc.args, code, errs)
			}
			if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "gptlab: ") {
				t.Errorf("Main(%q) stderr = %q, want one line mentioning %q", tc.args, errs, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("Main(%q) wrote %s", tc.args, out)
			}
		})
	}
	// control: the untouched int8 file evaluates.
	if code, _, errs := runMain("gpt", "eval", "--model", good); code != 0 {
		t.Errorf("gpt eval of the good file: %d %s", code, errs)
	}
	if _, err := models.LoadInt8Checkpoint(good); err != nil {
		t.Error(err)
	}
}
