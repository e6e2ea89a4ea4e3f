package models

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if err := EncodeSafetensors(&plain, p.Tensors(""), p.Config().Metadata()); err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter"},
		{"truncated", good[:len(good)/2], "data_offsets"},
		{"plain params", plain.Bytes(), "format"},
		{"bad step", edit(`"step":"1"`, `"step":"9"`), "step 9"},
		{"bad lr", edit(`"lr":"0.001"`, `"lr":"fast!"`), "lr"},
		{"bad batcher", edit(`"batcher":"`, `"batcher":"zz`), "batcher"},
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
