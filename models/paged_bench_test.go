package models

import (
	"fmt"
	"testing"

	"gptlab/internal/testutil"
)

// BenchmarkPagedDecode is one decode step of baby: B sequences each
// decoding one token at context 32, blocks of 16. tokens/s = B / (ns/op).
func BenchmarkPagedDecode(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 1)
	const ctx, bs = 32, 16
	for _, B := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("b%d", B), func(b *testing.B) {
			per := cfg.Block / bs
			kv, err := NewPagedKV(cfg, bs, B*per)
			if err != nil {
				b.Fatal(err)
			}
			m, _ := NewPagedModel(p, kv)
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
		})
	}
}
