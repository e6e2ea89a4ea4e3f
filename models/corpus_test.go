package models

import (
	"math"
	"slices"
	"testing"

	"gptlab/internal/testutil"
)

// TestEntropyRateMatchesSample checks the exact entropy rate against two
// estimates from a long sample: the sample's mean -log P under the source
// (Shannon-McMillan-Breiman), and the plug-in conditional entropy of the
// empirical order-K counts, which also checks that Generate draws from the
// stated probabilities.
func TestEntropyRateMatchesSample(t *testing.T) {
	spec := DefaultCorpusSpec()
	m, err := NewMarkovSource(spec, 7)
	if err != nil {
		t.Fatal(err)
	}
	n := 1_000_000
	if testing.Short() {
		n = 300_000
	}
	ids := m.Generate(n, 8)
	h := m.EntropyRate()

	nll := 0.0
	for i := m.K; i < len(ids); i++ {
		nll -= math.Log(m.Prob(ids[i-m.K:i], ids[i]))
	}
	smb := nll / float64(len(ids)-m.K)

	states := len(m.probs)
	counts := make([]float64, states*m.A)
	for i := m.K; i < len(ids); i++ {
		counts[m.state(ids[i-m.K:i])*m.A+int(ids[i])]++
	}
	plugin, total := 0.0, float64(len(ids)-m.K)
	for s := range states {
		row := counts[s*m.A : (s+1)*m.A]
		rs := 0.0
		for _, c := range row {
			rs += c
		}
		for _, c := range row {
			if c > 0 {
				plugin -= c / total * math.Log(c/rs)
			}
		}
	}
	// standard error of the mean of -log P is about 1/sqrt(n) here (per-char
	// std ~1 nat); the plug-in estimate is biased low by ~(cells)/(2n).
	tol := 5 / math.Sqrt(float64(n))
	if math.Abs(smb-h) > tol {
		t.Errorf("mean -log P of a %d-char sample = %.4f, entropy rate = %.4f (tolerance %.4f)", n, smb, h, tol)
	}
	bias := float64(states*m.A) / (2 * float64(n))
	if math.Abs(plugin+bias/2-h) > tol+bias {
		t.Errorf("plug-in conditional entropy of a %d-char sample = %.4f, entropy rate = %.4f (tolerance %.4f)", n, plugin, h, tol+bias)
	}
	// negative control: the unigram and bigram entropies are far above H,
	// so the estimates above would fail if H were computed at a lower order.
	if h0, h1 := m.UnigramEntropy(), m.ConditionalEntropy(1); !(h0 > h1 && h1 > h+0.2) {
		t.Errorf("H0 = %.3f, H1 = %.3f, H2 = %.3f: want H0 > H1 > H2 + 0.2", h0, h1, h)
	}
	t.Logf("entropy rate %.4f, SMB %.4f, plug-in %.4f, unigram %.4f", h, smb, plugin, m.UnigramEntropy())
}

func TestStationaryIsFixedPoint(t *testing.T) {
	m, err := NewMarkovSource(DefaultCorpusSpec(), 3)
	if err != nil {
		t.Fatal(err)
	}
	pi := m.Stationary()
	next := make([]float64, len(pi))
	for s, ps := range pi {
		for c, p := range m.probs[s] {
			next[(s*m.A+c)%len(pi)] += ps * p
		}
	}
	sum := 0.0
	for s := range pi {
		sum += pi[s]
		if d := math.Abs(next[s] - pi[s]); d > 1e-12 {
			t.Fatalf("(πP)[%d] - π[%d] = %g, want ~0", s, s, d)
		}
	}
	if math.Abs(sum-1) > 1e-12 {
		t.Errorf("Σπ = %.15f, want 1", sum)
	}
}

func TestBlockBoundAndWindowLoss(t *testing.T) {
	m, err := NewMarkovSource(DefaultCorpusSpec(), 1)
	if err != nil {
		t.Fatal(err)
	}
	h, h1 := m.EntropyRate(), m.ConditionalEntropy(1)
	for _, T := range []int{1, 2, 16, 64} {
		want := (h1 + float64(T-1)*h) / float64(T) // order 2: first position sees one char
		if got := m.BlockBound(T); math.Abs(got-want) > 1e-12 {
			t.Errorf("BlockBound(%d) = %.6f, want %.6f", T, got, want)
		}
	}
	// The mean WindowLoss over many windows of the sample approaches the bound.
	ids := m.Generate(200_000, 2)
	const T = 16
	sum, n := 0.0, 0
	for i := 0; i+T+1 <= len(ids); i += T {
		sum += m.WindowLoss(ids[i:i+T], ids[i+1:i+T+1])
		n++
	}
	if got, want := sum/float64(n), m.BlockBound(T); math.Abs(got-want) > 0.02 {
		t.Errorf("mean WindowLoss over %d windows = %.4f, BlockBound(%d) = %.4f", n, got, T, want)
	}
}

func TestCorpusDeterministic(t *testing.T) {
	spec := DefaultCorpusSpec()
	a, _ := NewMarkovSource(spec, 5)
	b, _ := NewMarkovSource(spec, 5)
	c, _ := NewMarkovSource(spec, 6)
	if a.EntropyRate() != b.EntropyRate() {
		t.Errorf("same seed: entropy rates %v and %v differ", a.EntropyRate(), b.EntropyRate())
	}
	if a.EntropyRate() == c.EntropyRate() {
		t.Errorf("seeds 5 and 6 give the same entropy rate %v: the seed is ignored", a.EntropyRate())
	}
	if !slices.Equal(a.Generate(1000, 1), b.Generate(1000, 1)) {
		t.Error("same seed: Generate differs")
	}
	if slices.Equal(a.Generate(1000, 1), a.Generate(1000, 2)) {
		t.Error("Generate ignores its seed")
	}
}

func TestDefaultCorpus(t *testing.T) {
	d, err := DefaultCorpus(1, 64)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(d.Train) + len(d.Val); n != DefaultCorpusSpec().Chars {
		t.Errorf("DefaultCorpus has %d chars, want %d", n, DefaultCorpusSpec().Chars)
	}
	if d.Tok.Vocab() != len(DefaultCorpusSpec().Alphabet) {
		t.Errorf("DefaultCorpus vocab = %d, want %d", d.Tok.Vocab(), len(DefaultCorpusSpec().Alphabet))
	}
	t.Logf("DefaultCorpus: entropy rate %.4f nats/char", d.Source.EntropyRate())
}

// BenchmarkDefaultCorpus times making the embedded corpus, which every
// lab does at start.
func BenchmarkDefaultCorpus(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	b.ReportAllocs()
	b.SetBytes(int64(DefaultCorpusSpec().Chars))
	for b.Loop() {
		if _, err := DefaultCorpus(1, 64); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMarkovSourceBadSpec(t *testing.T) {
	base := DefaultCorpusSpec()
	for _, tc := range []struct {
		name string
		edit func(*CorpusSpec)
	}{
		{"alphabet", func(s *CorpusSpec) { s.Alphabet = "aaa" }},
		{"order", func(s *CorpusSpec) { s.Order = 0 }},
		{"successors", func(s *CorpusSpec) { s.Successors = 1 }},
		{"escape", func(s *CorpusSpec) { s.Escape = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.edit(&s)
			if _, err := NewMarkovSource(s, 1); err == nil {
				t.Errorf("NewMarkovSource(%+v) succeeded, want an error", s)
			}
		})
	}
}
