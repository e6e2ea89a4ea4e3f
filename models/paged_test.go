package models

import (
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
)

// fullLogits is the reference: the full forward (B=1, T=Block) over each
// sequence, padded past its end (causal attention never reads the
// padding): (Block, V) logits per sequence.
func fullLogits(t *testing.T, cfg Config, p *Params, seqs [][]int32) [][]float32 {
	t.Helper()
	m, err := NewModel(cfg, p, 1, cfg.Block, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var out [][]float32
	for _, s := range seqs {
		in := make([]int32, cfg.Block)
		copy(in, s)
		if _, err := m.Step(in, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), m.Logits()...))
	}
	return out
}

// TestPagedMatchesFullForward runs sequences of different lengths through
// ragged steps (prefill chunks and decodes together, blocks scattered
// over the pool) and holds every position's logits to the full forward.
func TestPagedMatchesFullForward(t *testing.T) {
	for _, tc := range []struct {
		preset    string
		blockSize int
		maxChunk  int
	}{
		{"tiny", 4, 5},
		{"small", 16, 9},
		{"baby", 16, 1},
		{"baby", 7, 20},
		{"baby", 40, 3}, // decode rows against a block of two key panels, the second of 8 slots
		{"odd", 8, 3},   // heads of 24: decode rows through attend's general path
	} {
		t.Run(tc.preset, func(t *testing.T) {
			if tc.maxChunk == 1 {
				testutil.SkipEmulated(t, "baby one token a chunk runs natively; emulated, baby in chunks of 20 with blocks of 7 checks the same forward")
			}
			cfg, _ := Preset(tc.preset)
			if tc.preset == "odd" {
				cfg = Config{Vocab: 65, Block: 32, Layers: 2, Heads: 3, Embd: 72, Batch: 1}
			}
			p := NewParams(cfg, 7)
			rng := rand.New(rand.NewPCG(3, uint64(tc.blockSize)))
			lens := []int{cfg.Block, cfg.Block - 3, 1, cfg.Block / 2, 5}
			seqs := make([][]int32, len(lens))
			for i, n := range lens {
				for range n {
					seqs[i] = append(seqs[i], int32(rng.IntN(cfg.Vocab)))
				}
			}
			want := fullLogits(t, cfg, p, seqs)
			per := (cfg.Block + tc.blockSize - 1) / tc.blockSize
			kv, err := NewPagedKV(cfg, tc.blockSize, per*len(seqs)+3)
			if err != nil {
				t.Fatal(err)
			}
			perm := rng.Perm(kv.Count)
			tables := make([][]int32, len(seqs))
			for i := range seqs {
				for j := range per {
					tables[i] = append(tables[i], int32(perm[i*per+j]))
				}
			}
			m, err := NewPagedModel(p, kv)
			if err != nil {
				t.Fatal(err)
			}
			done := make([]int, len(seqs))
			V := cfg.Vocab
			worst, checked := 0.0, 0
			for step := 0; ; step++ {
				var entries []PagedEntry
				var owner []int
				for i, s := range seqs {
					if done[i] == len(s) || (i == 4 && step < 3) { // the last joins late
						continue
					}
					n := min(1+rng.IntN(tc.maxChunk), len(s)-done[i])
					entries = append(entries, PagedEntry{Tokens: s[done[i] : done[i]+n], Start: done[i], Table: tables[i], Logits: true})
					owner = append(owner, i)
				}
				if len(entries) == 0 {
					break
				}
				got, err := m.ForwardAll(entries)
				if err != nil {
					t.Fatal(err)
				}
				r := 0
				for k, e := range entries {
					i := owner[k]
					for j := range e.Tokens {
						pos := e.Start + j
						d := testutil.MaxAbsDiff(got[r*V:(r+1)*V], want[i][pos*V:(pos+1)*V])
						worst = max(worst, d)
						if d > 1e-5 {
							t.Fatalf("step %d, sequence %d, position %d: logits differ by %g from the full forward", step, i, pos, d)
						}
						r++
						checked++
					}
					done[i] += len(e.Tokens)
				}
			}
			t.Logf("%d positions, worst difference %.2g", checked, worst)
		})
	}
}

// TestPagedLastLogits checks that Forward returns the last row of each
// entry asking for logits, and that a corrupted pool is seen (a negative
// control: the test above would pass on a model ignoring the cache only
// if the logits did not depend on earlier tokens).
func TestPagedLastLogits(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	seq := []int32{1, 2, 3, 4, 5, 6, 7}
	want := fullLogits(t, cfg, p, [][]int32{seq})[0]
	kv, _ := NewPagedKV(cfg, 4, 4)
	m, err := NewPagedModel(p, kv)
	if err != nil {
		t.Fatal(err)
	}
	table := []int32{2, 0}
	if _, err := m.Forward([]PagedEntry{{Tokens: seq[:6], Table: table}}); err != nil {
		t.Fatal(err)
	}
	V := cfg.Vocab
	got, err := m.Forward([]PagedEntry{{Tokens: seq[6:], Start: 6, Table: table, Logits: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != V {
		t.Fatalf("%d logits, want one row of %d", len(got), V)
	}
	if d := testutil.MaxAbsDiff(got, want[6*V:7*V]); d > 1e-5 {
		t.Fatalf("last logits differ by %g", d)
	}
	// Overwrite block 2 (positions 0-3) with block 1's garbage: the
	// decode must change.
	if err := kv.Copy(1, 2, 4); err != nil {
		t.Fatal(err)
	}
	got, _ = m.Forward([]PagedEntry{{Tokens: seq[6:], Start: 6, Table: table, Logits: true}})
	if d := testutil.MaxAbsDiff(got, want[6*V:7*V]); d < 1e-4 {
		t.Fatalf("a corrupted pool changed the logits by only %g", d)
	}
}

func TestPagedRejects(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	kv, _ := NewPagedKV(cfg, 4, 4)
	m, _ := NewPagedModel(p, kv)
	for name, e := range map[string]PagedEntry{
		"empty":       {Table: []int32{0}},
		"past block":  {Tokens: []int32{1, 2}, Start: cfg.Block - 1, Table: []int32{0, 1, 2, 3}},
		"short table": {Tokens: []int32{1, 2, 3, 4, 5}, Table: []int32{0}},
		"bad block":   {Tokens: []int32{1}, Table: []int32{9}},
		"bad token":   {Tokens: []int32{int32(cfg.Vocab)}, Table: []int32{0}},
	} {
		if _, err := m.Forward([]PagedEntry{e}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
