package models

import (
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/internal/testutil"
)

func TestLoadParamsErrors(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	const name = "transformer.h.1.mlp.c_fc.weight"
	for _, tc := range []struct {
		name   string
		mutate func(map[string]safetensors.Tensor)
		want   []string
	}{
		{"missing", func(m map[string]safetensors.Tensor) { delete(m, name) }, []string{name, "missing", "[128 32]"}},
		{"extra", func(m map[string]safetensors.Tensor) { m["lm_head.weight"] = safetensors.F32([]int{1}, []float32{0}) }, []string{"lm_head.weight", "[1]"}},
		{"wrong shape", func(m map[string]safetensors.Tensor) {
			m[name] = safetensors.F32([]int{32, 128}, make([]float32, 4096))
		}, []string{name, "[32 128]", "[128 32]"}},
		{"wrong dtype", func(m map[string]safetensors.Tensor) {
			m[name] = safetensors.Int("I64", []int{128, 32}, make([]int64, 4096))
		}, []string{name, "I64", "F32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := p.Tensors("")
			tc.mutate(ts)
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := safetensors.Write(path, ts, cfg.Metadata()); err != nil {
				t.Fatal(err)
			}
			_, err := LoadParams(path)
			if err == nil {
				t.Fatalf("LoadParams succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadParams error %q does not mention %q", err, w)
				}
			}
		})
	}
	// a checkpoint of another config fails to load into these params.
	other := cfg
	other.Layers = 3
	path3 := filepath.Join(t.TempDir(), "l3.safetensors")
	if err := NewParams(other, 1).SaveParams(path3); err != nil {
		t.Fatal(err)
	}
	if err := p.Clone().Load(path3); err == nil || !strings.Contains(err.Error(), "transformer.h.2.") {
		t.Errorf("loading a 3-layer checkpoint into 2-layer params: %v, want an error naming a layer-2 tensor", err)
	}
	// control: the unmodified checkpoint loads and is equal.
	path := filepath.Join(t.TempDir(), "ok.safetensors")
	if err := p.SaveParams(path); err != nil {
		t.Fatal(err)
	}
	q, err := LoadParams(path)
	if err != nil {
		t.Fatal(err)
	}
	if testutil.MaxAbsDiff(q.Data(), p.Data()) != 0 || q.Config() != cfg {
		t.Errorf("round trip changed the parameters or config (%+v vs %+v)", q.Config(), cfg)
	}
}
