package models

import (
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
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
	testutil.SkipSpeedEmulated(b)
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
	testutil.SkipSpeedEmulated(b)
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

// BenchmarkSample generates a block's worth of characters from a
// one-character prompt (the context grows to the full block), decoding
// against the KV cache or running the whole window for every character:
// tokens per second both ways.
func BenchmarkSample(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, name := range []string{"small", "baby"} {
		cfg, _ := Preset(name)
		p := NewParams(cfg, 1)
		tok, err := TokenizerFromChars(vocabChars(cfg.Vocab))
		if err != nil {
			b.Fatal(err)
		}
		for _, full := range []bool{false, true} {
			path := map[bool]string{false: "cached", true: "full-window"}[full]
			b.Run(name+"/"+path, func(b *testing.B) {
				s, err := NewSampler(p, tok)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				sc := SampleConfig{Tokens: cfg.Block - 1, Temperature: 1, FullWindow: full}
				if _, err := s.generate([]int32{0}, sc, nil); err != nil { // compile the graphs
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.generate([]int32{0}, sc, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(sc.Tokens)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// vocabChars is a vocabulary of n distinct characters.
func vocabChars(n int) string {
	r := make([]rune, n)
	for i := range r {
		r[i] = rune('!' + i)
	}
	return string(r)
}
