package models

import (
	"errors"
	"strings"
	"testing"
)

// TestOpProfile: the profile covers every op the arena runs once, by
// kind; the three products of every linear layer carry the FLOPs the
// shapes give (forward A×B or A×Bᵀ, and the two backward products); and
// StepFlops is the kinds' sum; and a model off the arena is refused.
func TestOpProfile(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	idx, tgt := make([]int32, cfg.Batch*cfg.Block), make([]int32, cfg.Batch*cfg.Block)
	if _, err := m.Step(idx, tgt); err != nil {
		t.Fatal(err)
	}
	kinds, err := m.OpProfile(3)
	if err != nil {
		t.Fatal(err)
	}
	ops, matmul, all := 0, 0.0, 0.0
	for i, k := range kinds {
		ops += k.Ops
		all += k.Flops
		if strings.HasPrefix(k.Kind, "matmul ") {
			matmul += k.Flops
		}
		if i > 0 && k.Time > kinds[i-1].Time {
			t.Errorf("%s (%v) after %s (%v): want the slowest first", k.Kind, k.Time, kinds[i-1].Kind, kinds[i-1].Time)
		}
	}
	if ops == 0 || ops > m.Arena().Steps() {
		t.Errorf("%d ops profiled, the program has %d steps", ops, m.Arena().Steps())
	}
	// Every linear layer (c_attn, c_proj, c_fc, mlp c_proj per layer) and
	// the tied head: 2·N·in·out FLOPs forward, twice that backward.
	C, N, L := float64(cfg.Embd), float64(cfg.Batch*cfg.Block), float64(cfg.Layers)
	linear := L*(2*N*C*3*C+2*N*C*C+2*N*C*4*C+2*N*4*C*C) + 2*N*C*float64(cfg.Vocab)
	if want := 3 * linear; matmul < want || matmul > want*1.5 {
		t.Errorf("the products count %.4g FLOPs, want the linear layers' %.4g and a little more for attention", matmul, want)
	}

	if got := m.StepFlops(); got != all {
		t.Errorf("StepFlops = %.6g, the profile's kinds sum %.6g", got, all)
	}

	tape, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithTapeMachine())
	if err != nil {
		t.Fatal(err)
	}
	defer tape.Close()
	if got := tape.StepFlops(); got < all {
		t.Errorf("StepFlops on the TapeMachine = %.6g, below the arena program's %.6g", got, all)
	}
	if _, err := tape.OpProfile(1); !errors.Is(err, ErrConfig) {
		t.Errorf("OpProfile on the TapeMachine: %v, want ErrConfig", err)
	}
}
