package models

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func TestPick(t *testing.T) {
	logits := []float32{0, 3, 1, 2.5, -1}
	probs, order := make([]float64, 5), make([]int, 5)
	rng := rand.New(rand.NewPCG(1, 2))
	if got := pick(logits, probs, order, SampleConfig{Temperature: 0}, rng); got != 1 {
		t.Errorf("pick(temperature 0) = %d, want 1 (argmax)", got)
	}
	// Greedy is the first of the largest logits, ties and all: what a
	// stable sort by logit puts first (how temperatures above 0 order them).
	for trial := range 200 {
		l := make([]float32, 1+rng.IntN(70))
		for i := range l {
			l[i] = float32(rng.IntN(5)) // ties are common
		}
		first := slices.IndexFunc(l, func(v float32) bool { return v == slices.Max(l) })
		if got := pick(l, make([]float64, len(l)), make([]int, len(l)), SampleConfig{}, rng); int(got) != first {
			t.Fatalf("trial %d: pick(temperature 0) of %v = %d, want %d", trial, l, got, first)
		}
	}
	for _, tc := range []struct {
		name    string
		sc      SampleConfig
		allowed string // tokens that may be drawn
		needAll bool   // every allowed token should appear in 2000 draws
	}{
		{"top-1", SampleConfig{Temperature: 1, TopK: 1}, "1", true},
		{"top-2", SampleConfig{Temperature: 1, TopK: 2}, "13", true},
		{"all", SampleConfig{Temperature: 5}, "01234", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[int32]int{}
			for range 2000 {
				seen[pick(logits, probs, order, tc.sc, rng)]++
			}
			for id, n := range seen {
				if !strings.ContainsRune(tc.allowed, rune('0'+id)) {
					t.Errorf("pick(%+v) drew token %d (%d times), allowed %s", tc.sc, id, n, tc.allowed)
				}
			}
			if tc.needAll && len(seen) != len(tc.allowed) {
				t.Errorf("pick(%+v) drew %v, want all of %s", tc.sc, seen, tc.allowed)
			}
		})
	}
}

func TestSamplerLearnsPattern(t *testing.T) {
	text := strings.Repeat("abcd", 400)
	data, err := FromText(text, 16)
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyTrainConfig(t, 60)
	cfg.LR, cfg.Warmup = 1e-2, 5
	tr, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Run(context.Background(), cfg.Iters, nil); err != nil {
		t.Fatal(err)
	}
	s, err := NewSampler(tr.Params, data.Tok)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Generate("ab", SampleConfig{Tokens: 30, Temperature: 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("cdab", 8)[:30]; got != want {
		t.Errorf("greedy continuation of \"ab\" = %q, want %q", got, want)
	}
	// a prompt longer than the block: the window slides
	got, err = s.Generate(strings.Repeat("abcd", 6)+"a", SampleConfig{Tokens: 7, Temperature: 0})
	if err != nil || got != "bcdabcd" {
		t.Errorf("greedy continuation of a 25-char prompt = %q, %v; want \"bcdabcd\"", got, err)
	}
	// reproducible from the seed, different across seeds (temperature high)
	sc := SampleConfig{Tokens: 40, Temperature: 3, Seed: 5}
	a, _ := s.Generate("a", sc)
	b, _ := s.Generate("a", sc)
	sc.Seed = 6
	c, _ := s.Generate("a", sc)
	if a != b {
		t.Errorf("same seed: %q then %q", a, b)
	}
	if a == c {
		t.Errorf("seeds 5 and 6 both give %q", a)
	}
	if _, err := s.Generate("abz", sc); !errors.Is(err, ErrBadData) {
		t.Errorf("prompt with a character outside the vocabulary: error = %v, want ErrBadData", err)
	}
}

// trainedTiny is the tiny GPT after 40 steps on the default corpus: sharp
// enough logits that the cached and full-window paths are compared on a
// model that says something.
func trainedTiny(t testing.TB) (*Params, *Tokenizer) {
	t.Helper()
	cfg := tinyTrainConfig(t, 40)
	data, err := DefaultCorpus(uint64(cfg.Seed), cfg.Model.Block)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer(cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background(), cfg.Iters, nil); err != nil {
		t.Fatal(err)
	}
	return tr.Params, data.Tok
}

// TestCachedSamplerEqualsFullWindow: decoding against the KV cache draws
// the same tokens as running the whole window for every token, from
// logits within 1e-5, over prompts shorter than, as long as and longer
// than the block, temperatures and seeds, for long enough that the window
// slides (and the cache is rebuilt every step).
func TestCachedSamplerEqualsFullWindow(t *testing.T) {
	p, tok := trainedTiny(t)
	block := p.Config().Block
	prompts := [][]int32{{0}, {3, 1, 4}, make([]int32, block-1), make([]int32, block), make([]int32, 2*block+3)}
	for i, pr := range prompts[2:] {
		for j := range pr {
			pr[j] = int32((7*j + i) % tok.Vocab())
		}
	}
	s, err := NewSampler(p, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const tol = 1e-5
	worst := 0.0
	configs := []SampleConfig{
		{Tokens: 2*block + 5, Temperature: 0},
		{Tokens: 2*block + 5, Temperature: 0.8, Seed: 1},
		{Tokens: 2*block + 5, Temperature: 1.5, TopK: 5, Seed: 2},
	}
	if testutil.Trimmed() { // emulated -short: greedy and top-k, not also plain sampling (natively all three)
		configs = []SampleConfig{configs[0], configs[2]}
	}
	for pi, prompt := range prompts {
		for _, sc := range configs {
			var cached, full [][]float32
			a, err := s.generate(prompt, sc, func(l []float32) { cached = append(cached, slices.Clone(l)) })
			if err != nil {
				t.Fatal(err)
			}
			sc.FullWindow = true
			b, err := s.generate(prompt, sc, func(l []float32) { full = append(full, slices.Clone(l)) })
			if err != nil {
				t.Fatal(err)
			}
			for step := range full {
				for j, w := range full[step] {
					d := math.Abs(float64(cached[step][j]) - float64(w))
					worst = max(worst, d)
					if d > tol {
						t.Fatalf("prompt %d %+v step %d: logit %d cached %v, full window %v (|diff| %g > %g)", pi, sc, step, j, cached[step][j], w, d, tol)
					}
				}
			}
			if !slices.Equal(a, b) {
				t.Errorf("prompt %d %+v: cached tokens %v, full window %v", pi, sc, a, b)
			}
		}
	}
	t.Logf("largest |cached - full window| logit difference: %g; %d prefills, %d decode steps", worst, s.dec.Prefills, s.dec.Decodes)
	// within the block nearly every token is a decode step; past it, every
	// one a prefill of the slid window (a block's worth a prompt over the
	// three configs; proportionally fewer over the trimmed two)
	if s.dec.Decodes < len(prompts)*block*len(configs)/3 {
		t.Errorf("%d decode steps: the cached path did not decode from the cache", s.dec.Decodes)
	}
}

// TestDecoderReadsTheCache is the negative control of the equality above:
// one token decoded after two different prefixes gets different logits,
// so a decode step really reads what the cache holds.
func TestDecoderReadsTheCache(t *testing.T) {
	p, _ := trainedTiny(t)
	d, err := NewDecoder(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var got [2][]float32
	for i, prefix := range [][]int32{{1, 2, 3}, {4, 5, 6}} {
		d.Reset()
		if _, err := d.Append(prefix); err != nil {
			t.Fatal(err)
		}
		l, err := d.Append([]int32{7})
		if err != nil {
			t.Fatal(err)
		}
		got[i] = slices.Clone(l)
	}
	if slices.Equal(got[0], got[1]) {
		t.Error("the same token after different prefixes gets the same logits: the cache is not read")
	}
}

// TestDecoderAppendErrors: a window that outgrows the block, or a token
// outside the vocabulary, is an error, not a panic.
func TestDecoderAppendErrors(t *testing.T) {
	cfg, _ := Preset("tiny")
	d, err := NewDecoder(NewParams(cfg, 1), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Append(make([]int32, cfg.Block)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append([]int32{1}); !errors.Is(err, ErrTokens) {
		t.Errorf("Append past the block: error %v, want ErrTokens", err)
	}
	d.Reset()
	if _, err := d.Append([]int32{int32(cfg.Vocab)}); !errors.Is(err, ErrTokens) {
		t.Errorf("Append of token %d: error %v, want ErrTokens", cfg.Vocab, err)
	}
	if d.Len() != 0 {
		t.Errorf("after a refused Append the cache holds %d tokens, want 0", d.Len())
	}
}
