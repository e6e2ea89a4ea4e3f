package models

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Config
	}{
		{"tiny", Config{Vocab: 65, Block: 16, Layers: 2, Heads: 2, Embd: 32, Batch: 2}},
		{"small", Config{Vocab: 65, Block: 64, Layers: 2, Heads: 4, Embd: 64, Batch: 16}},
		{"baby", Config{Vocab: 65, Block: 64, Layers: 4, Heads: 4, Embd: 128, Batch: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Preset(tc.name)
			if err != nil || got != tc.want {
				t.Errorf("Preset(%q) = %+v, %v, want %+v", tc.name, got, err, tc.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Preset(%q).Validate() = %v", tc.name, err)
			}
		})
	}
	if _, err := Preset("huge"); !errors.Is(err, ErrConfig) {
		t.Errorf("Preset(huge) error = %v, want ErrConfig", err)
	}
}

func TestConfigSetAndValidate(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		wantErr    string // "" when the override and the validation succeed
	}{
		{"layers", "3", ""},
		{"dropout", "0.1", ""},
		{"heads", "3", "not divisible"},
		{"embd", "0", "embd = 0"},
		{"batch", "-1", "batch = -1"},
		{"dropout", "1", "dropout = 1"},
		{"dropout", "NaN", "dropout = NaN"},
		{"layers", "two", "not an integer"},
		{"dropout", "x", "not a number"},
		{"width", "3", "unknown key"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			c, _ := Preset("tiny")
			err := c.Set(tc.key, tc.value)
			if err == nil {
				err = c.Validate()
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Errorf("Set(%s, %s) then Validate = %v, want nil", tc.key, tc.value, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Set(%s, %s) then Validate = %v, want ErrConfig mentioning %q", tc.key, tc.value, err, tc.wantErr)
			}
		})
	}
}

func TestConfigMetadataRoundTrip(t *testing.T) {
	c := Config{Vocab: 70, Block: 8, Layers: 3, Heads: 2, Embd: 16, Batch: 5, Dropout: 0.25}
	got, err := ConfigFromMetadata(c.Metadata())
	if err != nil || got != c {
		t.Errorf("ConfigFromMetadata(Metadata()) = %+v, %v, want %+v", got, err, c)
	}
	m := c.Metadata()
	delete(m, "n_head")
	if _, err := ConfigFromMetadata(m); err == nil || !strings.Contains(err.Error(), "n_head") {
		t.Errorf("metadata without n_head: error %v, want one naming n_head", err)
	}
}

func TestNewParamsDistributions(t *testing.T) {
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 7)
	if q := NewParams(cfg, 7); testutil.MaxAbsDiff(p.Data(), q.Data()) != 0 {
		t.Errorf("NewParams is not deterministic for one seed")
	}
	if q := NewParams(cfg, 8); testutil.MaxAbsDiff(p.Data(), q.Data()) == 0 {
		t.Errorf("NewParams(seed 7) == NewParams(seed 8)")
	}
	std := func(v []float32) (mean, sd float64) {
		for _, x := range v {
			mean += float64(x)
		}
		mean /= float64(len(v))
		for _, x := range v {
			sd += (float64(x) - mean) * (float64(x) - mean)
		}
		return mean, math.Sqrt(sd / float64(len(v)))
	}
	projStd := 0.02 / math.Sqrt(2*float64(cfg.Layers))
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{"transformer.wte.weight", 0, 0.02},
		{"transformer.h.0.attn.c_attn.weight", 0, 0.02},
		{"transformer.h.3.mlp.c_fc.weight", 0, 0.02},
		{"transformer.h.1.attn.c_proj.weight", 0, projStd},
		{"transformer.h.2.mlp.c_proj.weight", 0, projStd},
		{"transformer.h.0.ln_1.weight", 1, 0},
		{"transformer.h.0.mlp.c_fc.bias", 0, 0},
		{"transformer.ln_f.bias", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, s := std(p.Slice(tc.name))
			if math.Abs(m-tc.mean) > 0.002 || math.Abs(s-tc.std) > 0.1*tc.std+1e-12 {
				t.Errorf("%s: mean %.4g std %.4g, want %.4g and %.4g", tc.name, m, s, tc.mean, tc.std)
			}
		})
	}
	// 4 layers of 12 tensors, wte, wpe and ln_f's two.
	if n := len(p.Names()); n != 4*12+4 {
		t.Errorf("len(Names()) = %d, want %d", n, 4*12+4)
	}
	want := 65*128 + 64*128 + 4*(12*128*128+13*128) + 2*128
	if p.Count() != want {
		t.Errorf("Count() = %d, want %d", p.Count(), want)
	}
}

func ExamplePreset() {
	cfg, _ := Preset("tiny")
	_ = cfg.Set("layers", "3")
	p := NewParams(cfg, 1)
	fmt.Println(cfg.Validate(), p.Count(), p.Names()[2], p.Shape("transformer.h.0.attn.c_attn.weight"))
	// Output: <nil> 40768 transformer.h.0.ln_1.weight [96 32]
}

func FuzzConfigSet(f *testing.F) {
	for _, k := range ConfigKeys() {
		f.Add(k, "3")
	}
	f.Add("dropout", "0.5")
	f.Add("heads", "-1")
	f.Add("embd", "1e9")
	f.Fuzz(func(t *testing.T, key, value string) {
		c, _ := Preset("tiny")
		if err := c.Set(key, value); err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("Set(%q, %q) error %v does not wrap ErrConfig", key, value, err)
			}
			return
		}
		if err := c.Validate(); err == nil {
			if c.Embd%c.Heads != 0 || c.Dropout < 0 || c.Dropout >= 1 {
				t.Errorf("Validate accepted %+v", c)
			}
		}
	})
}

func FuzzConfigFromMetadata(f *testing.F) {
	f.Add("65", "16", "2", "2", "32", "2", "0.1")
	f.Add("65", "16", "2", "3", "32", "", "")
	f.Add("x", "", "-1", "0", "9999999999999999999", "1", "NaN")
	f.Fuzz(func(t *testing.T, v, b, l, h, e, batch, drop string) {
		meta := map[string]string{"vocab_size": v, "block_size": b, "n_layer": l, "n_head": h, "n_embd": e}
		if batch != "" {
			meta["batch"] = batch
		}
		if drop != "" {
			meta["dropout"] = drop
		}
		c, err := ConfigFromMetadata(meta)
		if err == nil && c.Validate() != nil {
			t.Errorf("ConfigFromMetadata(%v) = %+v, which does not validate", meta, c)
		}
	})
}
