package models

import (
	"math/rand/v2"
	"testing"
)

// randomBatch draws B*T tokens and targets from seed.
func randomBatch(cfg Config, B, T int, seed uint64) (idx, tgt []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	idx, tgt = make([]int32, B*T), make([]int32, B*T)
	for i := range idx {
		idx[i] = int32(rng.IntN(cfg.Vocab))
		tgt[i] = int32(rng.IntN(cfg.Vocab))
	}
	return idx, tgt
}

// BenchmarkTrainStep times one training step (forward, backward, AdamW)
// of each preset at its batch size and full block.
func BenchmarkTrainStep(b *testing.B) {
	for _, name := range PresetNames() {
		b.Run(name, func(b *testing.B) {
			cfg, _ := Preset(name)
			p := NewParams(cfg, 1)
			m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
			if err != nil {
				b.Fatal(err)
			}
			opt := NewAdamW(p, DefaultAdamW())
			idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 1)
			b.ReportAllocs()
			b.SetBytes(int64(4 * p.Count()))
			for b.Loop() {
				if _, err := m.Step(idx, tgt); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Step(m, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cfg.Batch*cfg.Block)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkAdamW times the optimizer alone on baby's parameters: it must
// not allocate.
func BenchmarkAdamW(b *testing.B) {
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 1)
	opt := NewAdamW(p, DefaultAdamW())
	g := make([]float32, p.Count())
	for i := range g {
		g[i] = 1e-3
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := opt.StepFlat(g, 1e-3); err != nil {
			b.Fatal(err)
		}
	}
}
