package models

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/precision"
)

// savedInt8 trains tiny for 3 steps on the default corpus, saves the
// training checkpoint and quantizes it under o: the checkpoint's path
// and the int8 checkpoint.
func savedInt8(t *testing.T, o QuantizeOptions) (string, *Int8Checkpoint) {
	t.Helper()
	cfg := tinyTrainConfig(t, 3)
	data, err := DefaultCorpus(uint64(cfg.Seed), cfg.Model.Block)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for range 3 {
		if _, err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	c, err := QuantizeCheckpoint(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

// TestInt8CheckpointRoundTrip: an int8 checkpoint reads back as written
// (codes, scales, the float32 part, the run's data and settings), its
// metadata names the scheme and the rounding rule, its matrices are I8,
// and its model evaluates as the one saved; quantizing it again is
// refused.
func TestInt8CheckpointRoundTrip(t *testing.T) {
	for _, o := range []QuantizeOptions{{Scheme: precision.Int8PerChannel}, {Scheme: precision.Int8PerBlock32, Head: true}, {Scheme: precision.Int8PerTensor}} {
		src, c := savedInt8(t, o)
		path := filepath.Join(t.TempDir(), "q.safetensors")
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		ts, meta, err := safetensors.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		if meta["quant_scheme"] != o.Scheme.String() || meta["quant_rounding"] != "nearest-even" || meta["format"] != Int8Format {
			t.Errorf("%v: metadata %v", o, meta)
		}
		if _, ok := meta["batcher"]; ok {
			t.Errorf("%v: the batch stream's state is kept", o)
		}
		if w := ts["transformer.h.0.mlp.c_fc.weight"]; w.DType != "I8" {
			t.Errorf("%v: c_fc is %s, want I8", o, w.DType)
		}
		if got := ts["transformer.wte.weight"].DType; got != map[bool]string{false: "F32", true: "I8"}[o.Head] {
			t.Errorf("%v: the token embedding is %s", o, got)
		}
		back, err := LoadInt8Checkpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if back.Vocab != c.Vocab || back.DataHash != c.DataHash || back.Seed != c.Seed || back.EvalBatches != c.EvalBatches || back.Step != 3 {
			t.Errorf("%v: run data %+v, want %+v", o, back, c)
		}
		if !slices.Equal(back.Model.Names(), c.Model.Names()) || !slices.Equal(back.Model.Params().Data(), c.Model.Params().Data()) {
			t.Errorf("%v: tensors differ after the round trip", o)
		}
		for _, n := range c.Model.Names() {
			a, b := c.Model.Tensor(n), back.Model.Tensor(n)
			if !slices.Equal(a.Codes(), b.Codes()) || !slices.Equal(a.Scales, b.Scales) {
				t.Errorf("%v: %s differs after the round trip", o, n)
			}
		}
		data, err := back.LoadData()
		if err != nil {
			t.Fatal(err)
		}
		l1, err := c.ValLosses(data, 2, Int8Dynamic)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := back.ValLosses(data, 2, Int8Dynamic)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(l1, l2) {
			t.Errorf("%v: losses %v after the round trip, %v before", o, l2, l1)
		}
		if _, err := QuantizeCheckpoint(path, o); !errors.Is(err, ErrAlreadyInt8) {
			t.Errorf("quantizing an int8 checkpoint: %v, want ErrAlreadyInt8", err)
		}
		if _, err := LoadInt8Checkpoint(src); !errors.Is(err, ErrNotInt8) {
			t.Errorf("a training checkpoint as int8: %v, want ErrNotInt8", err)
		}
	}
}

// TestInt8CheckpointRejects: each defect of an int8 file is an error
// naming the tensor (or key) and what is wrong; the untouched file (the
// control) loads.
func TestInt8CheckpointRejects(t *testing.T) {
	_, c := savedInt8(t, QuantizeOptions{Scheme: precision.Int8PerChannel})
	const w = "transformer.h.1.attn.c_proj.weight"
	cases := []struct {
		name string
		edit func(ts map[string]safetensors.Tensor, meta map[string]string)
		want string
	}{
		{"scales missing", func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, w+".scales") }, w + `.scales" of int8 tensor "` + w + `" missing`},
		{"scales of the wrong shape", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts[w+".scales"] = safetensors.F32([]int{3}, []float32{1, 1, 1})
		}, `scales "` + w + `.scales" have dtype F32 shape [3], want F32 shape [32]`},
		{"scale NaN", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts[w+".scales"].F32[4] = float32(math.NaN())
		}, w + ": scale 4 is non-finite"},
		{"scale negative", func(ts map[string]safetensors.Tensor, _ map[string]string) { ts[w+".scales"].F32[2] = -1 }, w + ": scale 2 is negative"},
		{"codes of the wrong shape", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts[w] = safetensors.I8([]int{32, 16}, make([]int8, 512))
		}, `int8 tensor "` + w + `" has shape [32 16], want [32 32]`},
		{"codes as F32", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts[w] = safetensors.F32([]int{32, 32}, make([]float32, 1024))
		}, `tensor "` + w + `" has dtype F32, want I8`},
		{"code -128", func(ts map[string]safetensors.Tensor, _ map[string]string) { ts[w].I8[40] = -128 }, w + ": code -128 at (1, 8)"},
		{"codes missing", func(ts map[string]safetensors.Tensor, _ map[string]string) { delete(ts, w) }, `int8 tensor "` + w + `" missing`},
		{"float32 weight non-finite", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["transformer.ln_f.bias"].F32[1] = float32(math.Inf(1))
		}, `"transformer.ln_f.bias": non-finite value +Inf at index 1`},
		{"extra tensor", func(ts map[string]safetensors.Tensor, _ map[string]string) {
			ts["lm_head.weight"] = safetensors.F32([]int{1}, []float32{0})
		}, `unexpected tensor "lm_head.weight"`},
		{"unknown scheme", func(_ map[string]safetensors.Tensor, m map[string]string) { m["quant_scheme"] = "row" }, `unknown int8 scheme "row"`},
		{"rounding", func(_ map[string]safetensors.Tensor, m map[string]string) { m["quant_rounding"] = "away" }, `quant_rounding = "away"`},
		{"a training checkpoint", func(_ map[string]safetensors.Tensor, m map[string]string) { m["format"] = CheckpointFormat }, "not an int8 checkpoint"},
	}
	encode := func(edit func(map[string]safetensors.Tensor, map[string]string)) []byte {
		ts, meta := c.Model.Tensors(), c.Metadata()
		for n, x := range ts { // edits must not reach the model
			x.F32, x.I8 = slices.Clone(x.F32), slices.Clone(x.I8)
			ts[n] = x
		}
		meta = maps.Clone(meta)
		if edit != nil {
			edit(ts, meta)
		}
		var buf bytes.Buffer
		if err := safetensors.Encode(&buf, ts, meta); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	if _, err := DecodeInt8Checkpoint(encode(nil)); err != nil {
		t.Fatalf("control: %v", err)
	}
	for _, tc := range cases {
		_, err := DecodeInt8Checkpoint(encode(tc.edit))
		if err == nil || !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrCheckpoint containing %q", tc.name, err, tc.want)
		}
	}
}
