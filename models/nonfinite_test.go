package models

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/internal/testutil"
)

// TestLoadRefusesNonFinite: a parameter file or a training checkpoint with
// a NaN or an infinity in its weights (or, for a checkpoint, in its AdamW
// moments) is refused by every loader, naming the tensor, the value and
// its first index; it once loaded, and gpt sample printed garbage from it.
func TestLoadRefusesNonFinite(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	const name = "transformer.h.0.attn.c_attn.weight"
	dir := t.TempDir()
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		ts := p.Clone().Tensors("")
		ts[name].F32[7] = bad
		ts[name].F32[9] = bad // the first one is named
		path := filepath.Join(dir, "params.safetensors")
		if err := safetensors.Write(path, ts, cfg.Metadata()); err != nil {
			t.Fatal(err)
		}
		want := []string{path, name, "non-finite value " + strings.TrimPrefix(fmtF32(bad), "+"), "index 7"}
		_, err := LoadParams(path)
		mentions(t, "LoadParams", err, ErrNonFinite, want...)
		err = p.Clone().Load(path)
		mentions(t, "Params.Load", err, ErrNonFinite, want...)
	}

	good := checkpointBytes(t)
	for _, tc := range []struct{ tensor, value string }{{name, "NaN"}, {"adamw.m", "NaN"}, {"adamw.v", "+Inf"}} {
		ts, meta, err := safetensors.Decode(good)
		if err != nil {
			t.Fatal(err)
		}
		v := float32(math.NaN())
		if tc.value == "+Inf" {
			v = float32(math.Inf(1))
		}
		ts[tc.tensor].F32[3] = v
		path := filepath.Join(dir, "model.safetensors")
		if err := safetensors.Write(path, ts, meta); err != nil {
			t.Fatal(err)
		}
		_, err = LoadCheckpoint(path)
		mentions(t, "LoadCheckpoint", err, ErrNonFinite, path, tc.tensor, "non-finite value "+tc.value, "index 3")
		if !errors.Is(err, ErrCheckpoint) {
			t.Errorf("LoadCheckpoint: %v does not wrap ErrCheckpoint", err)
		}
		_, err = LoadParams(path) // a training checkpoint holds the weights
		mentions(t, "LoadParams(training checkpoint)", err, ErrNonFinite, path, tc.tensor, "index 3")
	}
	// control: the clean checkpoint loads.
	if _, err := DecodeCheckpoint(good); err != nil {
		t.Fatal(err)
	}
}

func fmtF32(v float32) string {
	switch {
	case math.IsNaN(float64(v)):
		return "NaN"
	case v > 0:
		return "+Inf"
	}
	return "-Inf"
}

// mentions fails t unless err wraps sentinel and is one line with every
// one of words.
func mentions(t *testing.T, what string, err, sentinel error, words ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s succeeded, want an error mentioning %q", what, words)
		return
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: %v does not wrap %v", what, err, sentinel)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%s: error spans lines: %q", what, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

// TestWeightFiles: gpt train --out writes model.safetensors (the training
// checkpoint) and params.safetensors (the parameters alone). LoadParams
// reads either (it once refused the checkpoint: "unexpected tensor
// adamw.m"); LoadCheckpoint, which needs the vocabulary and the data, says
// in one line that a parameters file is not one and which file to pass.
func TestWeightFiles(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(ckpt, checkpointBytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	p, err := LoadParams(ckpt)
	if err != nil {
		t.Fatalf("LoadParams(a training checkpoint): %v", err)
	}
	if !slices.Equal(p.Data(), ck.Params.Data()) || p.Config() != ck.Params.Config() {
		t.Error("LoadParams(a training checkpoint) differs from its parameters")
	}
	if err := p.Clone().Load(ckpt); err != nil {
		t.Errorf("Params.Load(a training checkpoint): %v", err)
	}
	params := filepath.Join(dir, "params.safetensors")
	if err := ck.Params.SaveParams(params); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCheckpoint(params)
	mentions(t, "LoadCheckpoint(a parameters file)", err, ErrCheckpoint, params, "parameters alone", ckpt)
	// no checkpoint beside it: the message says what to pass all the same.
	lone := filepath.Join(t.TempDir(), "params.safetensors")
	if err := ck.Params.SaveParams(lone); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCheckpoint(lone)
	mentions(t, "LoadCheckpoint(a lone parameters file)", err, ErrCheckpoint, lone, "model.safetensors")
}

// BenchmarkNonFiniteCheck: the check every loader runs, over the weights
// of baby (one pass), beside the whole load of its parameter file.
func BenchmarkNonFiniteCheck(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 1)
	b.Run("check", func(b *testing.B) {
		ts := p.Tensors("")
		b.SetBytes(int64(4 * p.Count()))
		for b.Loop() {
			for n, t := range ts {
				if err := checkFinite(n, t.Shape, t.F32); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "params.safetensors")
		if err := p.SaveParams(path); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(4 * p.Count()))
		for b.Loop() {
			if _, err := LoadParams(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
