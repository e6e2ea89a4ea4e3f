package models

import (
	"testing"
)

// In a training graph of the baby config, every op runs from the arena as
// an allocation-free kernel: none falls back to UsePreallocDo or Do.
func TestArenaRunsEveryOpAsKernel(t *testing.T) {
	cfg, err := Preset("baby")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(cfg, NewParams(cfg, 1), cfg.Batch, cfg.Block, true)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := m.Arena()
	if p == nil { // the arena is the default executor: a model without one is a failure
		t.Fatal("NewModel with default options built no arena program")
	}
	s := p.Stats()
	t.Logf("arena stats: %+v", s)
	if s.Prealloc != 0 || s.Allocating != 0 || s.Kernels != s.Steps {
		t.Errorf("Stats() = %d kernels, %d UsePreallocDo, %d allocating of %d steps; want every step a kernel",
			s.Kernels, s.Prealloc, s.Allocating, s.Steps)
	}
}
