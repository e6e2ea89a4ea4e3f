package models

import (
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/precision"
)

// TestPagedInt8MatchesFullForward holds the int8 paged forward (mixed
// prefill chunks and decodes) to the int8 model's full forward
// (WithInt8, same kernel) at every position, and to nothing looser than
// the float32 model's distance from it: the int8 path is really taken
// (negative control: its logits are far from the float32 model's).
func TestPagedInt8MatchesFullForward(t *testing.T) {
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 7)
	q, err := Quantize(p, QuantizeOptions{Scheme: precision.Int8PerChannel})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	seqs := make([][]int32, 3)
	for i, n := range []int{cfg.Block, 20, 1} {
		for range n {
			seqs[i] = append(seqs[i], int32(rng.IntN(cfg.Vocab)))
		}
	}
	f32 := fullLogits(t, cfg, p, seqs)
	for _, tc := range []struct {
		kernel Int8Kernel
		tol    float64
	}{{Int8Dynamic, 1e-5}, {Int8WeightOnly, 1e-5}} {
		t.Run(tc.kernel.String(), func(t *testing.T) {
			full, err := NewModel(cfg, q.Params(), 1, cfg.Block, false, WithInt8(q, tc.kernel))
			if err != nil {
				t.Fatal(err)
			}
			defer full.Close()
			const bs = 16
			per := cfg.Block / bs
			kv, err := NewPagedKV(cfg, bs, per*len(seqs))
			if err != nil {
				t.Fatal(err)
			}
			m, err := NewPagedModelInt8(q, tc.kernel, kv)
			if err != nil {
				t.Fatal(err)
			}
			V := cfg.Vocab
			var entries []PagedEntry
			for i, s := range seqs {
				table := make([]int32, per)
				for j := range table {
					table[j] = int32(i*per + j)
				}
				entries = append(entries, PagedEntry{Tokens: s, Table: table, Logits: true})
			}
			got, err := m.ForwardAll(entries)
			if err != nil {
				t.Fatal(err)
			}
			r, worst, fromF32 := 0, 0.0, 0.0
			for i, s := range seqs {
				in := make([]int32, cfg.Block)
				copy(in, s)
				if _, err := full.Step(in, nil); err != nil {
					t.Fatal(err)
				}
				want := full.Logits()
				for pos := range s {
					worst = max(worst, testutil.MaxAbsDiff(got[r*V:(r+1)*V], want[pos*V:(pos+1)*V]))
					fromF32 = max(fromF32, testutil.MaxAbsDiff(got[r*V:(r+1)*V], f32[i][pos*V:(pos+1)*V]))
					r++
				}
			}
			if worst > tc.tol {
				t.Errorf("paged int8 logits differ by %g from the int8 full forward, want <= %g", worst, tc.tol)
			}
			if fromF32 < 1e-3 {
				t.Errorf("paged int8 logits within %g of the float32 model's: the int8 matrices are not used", fromF32)
			}
			t.Logf("worst %.2g from the int8 full forward, %.2g from float32's", worst, fromF32)
		})
	}
	if _, err := NewPagedModelInt8(q, Int8Kernel(9), nil); err == nil {
		t.Error("an unknown kernel was accepted")
	}
}
