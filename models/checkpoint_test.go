package models

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
)

// checkpointBytes trains tiny for one step and returns its checkpoint.
func checkpointBytes(t testing.TB) []byte {
	t.Helper()
	tr, err := NewTrainer(tinyTrainConfig(t, 4), tinyCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.TrainStep(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := tr.Save(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeCheckpointErrors(t *testing.T) {
	good := checkpointBytes(t)
	ck, err := DecodeCheckpoint(good)
	if err != nil {
		t.Fatalf("DecodeCheckpoint(a fresh checkpoint): %v", err)
	}
	if ck.Step != 1 || ck.Cfg.Iters != 4 || ck.Cfg.LR != 1e-3 || ck.Cfg.Model.Vocab != 24 {
		t.Errorf("DecodeCheckpoint: step %d, iters %d, lr %v, vocab %d; want 1, 4, 0.001, 24", ck.Step, ck.Cfg.Iters, ck.Cfg.LR, ck.Cfg.Model.Vocab)
	}
	// A plain parameter file (no training state) is refused with a reason.
	p := NewParams(ck.Cfg.Model, 1)
	var plain bytes.Buffer
	if err := safetensors.Encode(&plain, p.Tensors(""), p.Config().Metadata()); err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	// overwrite replaces the n bytes after key (the header keeps its length)
	overwrite := func(key, with string) []byte {
		b := bytes.Clone(good)
		i := bytes.Index(b, []byte(key)) + len(key)
		copy(b[i:], with)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter"},
		{"truncated", good[:len(good)/2], "data_offsets"},
		{"plain params", plain.Bytes(), "parameters alone"},
		{"bad step", edit(`"step":"1"`, `"step":"9"`), "step 9"},
		{"bad lr", edit(`"lr":"0.001"`, `"lr":"fast!"`), "lr"},
		{"bad batcher", overwrite(`"batcher":"`, "zz"), "batcher"},
		{"unknown precision", edit(`"precision":"f32"`, `"precision":"fp8"`), "fp8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeCheckpoint(tc.b)
			if !errors.Is(err, ErrCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeCheckpoint(%s) error = %v, want ErrCheckpoint mentioning %q", tc.name, err, tc.want)
			}
		})
	}
}

// FuzzDecodeCheckpoint: a checkpoint is outside input; any bytes either
// decode or fail with ErrCheckpoint, never panic.
func FuzzDecodeCheckpoint(f *testing.F) {
	good := checkpointBytes(f)
	f.Add(good)
	f.Add(good[:100])
	f.Add(bytes.Replace(good, []byte(`"step":"1"`), []byte(`"step":"-1"`), 1))
	f.Add(bytes.Replace(good, []byte(`"vocab":"`), []byte(`"vocab":"\u00ff`), 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := DecodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("DecodeCheckpoint error = %v, want ErrCheckpoint", err)
			}
			return
		}
		if ck.Params.Count() != len(ck.m) || len(ck.losses) != ck.Step {
			t.Fatalf("decoded checkpoint is inconsistent: %d params, %d moments, %d losses for step %d", ck.Params.Count(), len(ck.m), len(ck.losses), ck.Step)
		}
	})
}

// TestCheckpointBeta2 is the value used, not a sentinel: a run configured
// with beta2 0 trains with DefaultBeta2 and its checkpoint says 0.95. A
// checkpoint written before that (beta2 "0") still loads as 0.95 and
// resumes bitwise as the straight run continues.
func TestCheckpointBeta2(t *testing.T) {
	data := tinyCorpus(t)
	cfg := tinyTrainConfig(t, 4)
	cfg.Beta2 = 0
	straight, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if straight.Cfg.Beta2 != DefaultBeta2 {
		t.Fatalf("trainer Cfg.Beta2 = %v, want %v", straight.Cfg.Beta2, DefaultBeta2)
	}
	ctx := t.Context()
	if err := straight.Run(ctx, 4, nil); err != nil {
		t.Fatal(err)
	}
	part, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := part.Run(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := part.Save(path); err != nil {
		t.Fatal(err)
	}
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta["beta2"] != "0.95" {
		t.Errorf("checkpoint metadata beta2 = %q, want \"0.95\"", meta["beta2"])
	}
	meta["beta2"] = "0" // as written before the value used was recorded
	if err := safetensors.Write(path, ts, meta); err != nil {
		t.Fatal(err)
	}
	ck, err := LoadCheckpoint(path)
	if err != nil {
		t.Fatalf("older checkpoint with beta2 0: %v", err)
	}
	if ck.Cfg.Beta2 != DefaultBeta2 {
		t.Errorf("older checkpoint loads beta2 %v, want %v", ck.Cfg.Beta2, DefaultBeta2)
	}
	resumed, err := ck.Resume(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := resumed.Run(ctx, 4, nil); err != nil {
		t.Fatal(err)
	}
	want := straight.Params.Data()
	for i, x := range resumed.Params.Data() {
		if math.Float32bits(x) != math.Float32bits(want[i]) {
			t.Fatalf("resumed from a beta2-0 checkpoint, parameter %d is %v, the straight run's %v", i, x, want[i])
		}
	}
}
