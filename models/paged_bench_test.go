package models

import (
	"fmt"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/precision"
)

// BenchmarkPagedDecode is one decode step of baby: B sequences each
// decoding one token at context 32, blocks of 16. tokens/s = B / (ns/op).
func BenchmarkPagedDecode(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 1)
	q, err := Quantize(p, QuantizeOptions{Scheme: precision.Int8PerChannel})
	if err != nil {
		b.Fatal(err)
	}
	const ctx, bs = 32, 16
	for _, w := range []string{"f32", "int8-dynamic", "int8-weight-only"} {
		for _, B := range []int{1, 8, 32, 64} {
			name := fmt.Sprintf("b%d", B)
			if w != "f32" {
				name = w + "/" + name // the float32 benchmarks keep their names
			}
			b.Run(name, func(b *testing.B) { benchPagedDecode(b, cfg, p, q, w, B, ctx, bs) })
		}
	}
}

func benchPagedDecode(b *testing.B, cfg Config, p *Params, q *Quantized, w string, B, ctx, bs int) {
	per := cfg.Block / bs
	kv, err := NewPagedKV(cfg, bs, B*per)
	if err != nil {
		b.Fatal(err)
	}
	var m *PagedModel
	switch w {
	case "f32":
		m, err = NewPagedModel(p, kv)
	case "int8-dynamic":
		m, err = NewPagedModelInt8(q, Int8Dynamic, kv)
	default:
		m, err = NewPagedModelInt8(q, Int8WeightOnly, kv)
	}
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]PagedEntry, B)
	prompt := make([]int32, ctx)
	for i := range entries {
		table := make([]int32, per)
		for j := range table {
			table[j] = int32(i*per + j)
		}
		if _, err := m.Forward([]PagedEntry{{Tokens: prompt, Table: table}}); err != nil {
			b.Fatal(err)
		}
		entries[i] = PagedEntry{Tokens: []int32{int32(i % cfg.Vocab)}, Start: ctx, Table: table, Logits: true}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Forward(entries); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(B)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
