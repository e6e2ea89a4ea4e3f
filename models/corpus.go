package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// The embedded corpus is text drawn from a random order-k Markov chain over
// a small alphabet, built from a seed. Because the source is known, the best
// loss any model can reach on it is known too:
//
//	entropy rate H = Σ_s π(s) · H(P(·|s))   (nats per character)
//
// where s runs over the A^k contexts (the last k characters), π is the
// stationary distribution of the chain on contexts and P(·|s) the row of
// next-character probabilities. Each row is sparse and peaked (a few likely
// successors) mixed with a small uniform "escape" mass ε, which makes the
// chain irreducible and aperiodic, so π is unique and a long sample's
// average -log P converges to H (Shannon-McMillan-Breiman).
//
// A model that sees a window of T characters has less than k characters of
// context at the window's first positions; BlockBound gives the exact best
// mean loss over such a window.

// CorpusSpec describes the Markov source of the embedded corpus. Each
// row of next-character probabilities is a mixture
//
//	P(·|c_1..c_K) = ε/A + (1-ε) · (Mix[0]·F(·|c_1..c_K) + Σ_j Mix[j]·L_j(·|c_j))
//
// where c_j is the character j places back, F is a table over whole
// contexts and L_j a table over single characters; every table row has 2
// to Successors likely successors with peaked weights. The lag tables give
// the chain structure a small model picks up quickly (one attention head
// per lag), the full-context table the part that needs more training.
type CorpusSpec struct {
	Alphabet   string    // distinct characters; sorted into token order
	Order      int       // K: characters of context
	Mix        []float64 // K+1 weights: whole context, then 1..K places back; sum 1
	Successors int       // likely successors per table row (2..Successors, chosen per row)
	Peak       float64   // larger: more peaked rows (weights u^Peak, u uniform)
	Escape     float64   // ε: probability mass spread uniformly over the alphabet
	Chars      int       // length of the generated corpus
}

// DefaultCorpusSpec is the source `gptlab` trains on when no data file is
// given: an order-2 chain over 24 characters.
func DefaultCorpusSpec() CorpusSpec {
	return CorpusSpec{
		Alphabet:   " .abcdefghijklmnopqrstuv",
		Order:      2,
		Mix:        []float64{0.2, 0.6, 0.2},
		Successors: 3,
		Peak:       4,
		Escape:     0.02,
		Chars:      300_000,
	}
}

// MarkovSource is an order-k Markov chain over an alphabet with its
// stationary distribution.
type MarkovSource struct {
	Spec    CorpusSpec
	Symbols []rune      // token order (sorted alphabet)
	A, K    int         // alphabet size, order
	probs   [][]float64 // context -> next-symbol distribution (A entries, sum 1)
	tables  [][]sparseRow
	mixCum  []float64 // cumulative Mix
	// prefix[j] is the stationary distribution of j consecutive symbols
	// (j = 1..K), indexed like a context of length j; prefix[K] is π.
	prefix [][]float64
}

// sparseRow is a few successors with cumulative probabilities (last = 1).
type sparseRow struct {
	next []int32
	cum  []float64
}

func (r sparseRow) draw(u float64) int32 {
	j := 0
	for j < len(r.cum)-1 && u >= r.cum[j] {
		j++
	}
	return r.next[j]
}

func randomRow(rng *rand.Rand, A, maxSucc int, peak float64) sparseRow {
	k := 2 + rng.IntN(maxSucc-1) // 2..maxSucc
	next := rng.Perm(A)[:k]
	w := make([]float64, k)
	total := 0.0
	for i := range w {
		w[i] = math.Pow(rng.Float64(), peak) + 1e-3
		total += w[i]
	}
	r := sparseRow{next: make([]int32, k), cum: make([]float64, k)}
	acc := 0.0
	for i, c := range next {
		acc += w[i] / total
		r.next[i], r.cum[i] = int32(c), acc
	}
	r.cum[k-1] = 1
	return r
}

// prob is the row's probability of c.
func (r sparseRow) prob(c int32) float64 {
	prev := 0.0
	for i, n := range r.next {
		if n == c {
			return r.cum[i] - prev
		}
		prev = r.cum[i]
	}
	return 0
}

// NewMarkovSource builds the chain of spec from seed.
func NewMarkovSource(spec CorpusSpec, seed uint64) (*MarkovSource, error) {
	syms := []rune(spec.Alphabet)
	slices.Sort(syms)
	syms = slices.Compact(syms)
	mixSum := 0.0
	for _, w := range spec.Mix {
		if !(w >= 0) {
			return nil, fmt.Errorf("corpus: mix weight %g is negative", w)
		}
		mixSum += w
	}
	switch {
	case len(syms) < 2:
		return nil, fmt.Errorf("corpus: alphabet %q needs at least 2 distinct characters", spec.Alphabet)
	case spec.Order < 1 || spec.Order > 4:
		return nil, fmt.Errorf("corpus: order %d outside 1..4", spec.Order)
	case len(spec.Mix) != spec.Order+1 || math.Abs(mixSum-1) > 1e-9:
		return nil, fmt.Errorf("corpus: mix %v needs order+1 = %d weights summing to 1", spec.Mix, spec.Order+1)
	case spec.Successors < 2 || spec.Successors > len(syms):
		return nil, fmt.Errorf("corpus: successors %d outside 2..%d", spec.Successors, len(syms))
	case !(spec.Escape > 0 && spec.Escape < 1):
		return nil, fmt.Errorf("corpus: escape %g outside (0, 1)", spec.Escape)
	}
	A, K := len(syms), spec.Order
	n := 1
	for range K {
		n *= A
	}
	rng := rand.New(rand.NewPCG(seed, 0x636f72707573)) // "corpus"
	m := &MarkovSource{Spec: spec, Symbols: syms, A: A, K: K, probs: make([][]float64, n), tables: make([][]sparseRow, K+1)}
	acc := 0.0
	for _, w := range spec.Mix {
		acc += w
		m.mixCum = append(m.mixCum, acc)
	}
	m.mixCum[K] = 1
	for j := range K + 1 {
		rows := A
		if j == 0 {
			rows = n
		}
		for range rows {
			m.tables[j] = append(m.tables[j], randomRow(rng, A, spec.Successors, spec.Peak))
		}
	}
	for s := range n {
		row := make([]float64, A)
		for c := range row {
			p := 0.0
			for j, w := range spec.Mix {
				p += w * m.tables[j][m.tableRow(s, j)].prob(int32(c))
			}
			row[c] = spec.Escape/float64(A) + (1-spec.Escape)*p
		}
		m.probs[s] = row
	}
	m.prefix = make([][]float64, K+1)
	m.prefix[K] = m.stationary()
	for j := K - 1; j >= 1; j-- {
		// marginalise the oldest symbol: by stationarity the last j symbols
		// of a context have the law of any j consecutive symbols.
		p := make([]float64, len(m.prefix[j+1])/A)
		for s, x := range m.prefix[j+1] {
			p[s%len(p)] += x
		}
		m.prefix[j] = p
	}
	return m, nil
}

// tableRow is the row of table j used in context s: s itself for the
// whole-context table, else the character j places back.
func (m *MarkovSource) tableRow(s, j int) int {
	if j == 0 {
		return s
	}
	for range j - 1 {
		s /= m.A
	}
	return s % m.A
}

// stationary solves π = πP on contexts by power iteration; the escape mass
// makes the chain mix in a few dozen steps.
func (m *MarkovSource) stationary() []float64 {
	n := len(m.probs)
	pi := make([]float64, n)
	for s := range pi {
		pi[s] = 1 / float64(n)
	}
	next := make([]float64, n)
	for range 10000 {
		clear(next)
		for s, ps := range pi {
			base := (s * m.A) % n
			for c, p := range m.probs[s] {
				next[base+c] += ps * p
			}
		}
		diff := 0.0
		for s := range pi {
			diff += math.Abs(next[s] - pi[s])
		}
		pi, next = next, pi
		if diff < 1e-15 {
			break
		}
	}
	return pi
}

// Stationary returns π, the stationary distribution over contexts.
func (m *MarkovSource) Stationary() []float64 { return slices.Clone(m.prefix[m.K]) }

// Prob is P(next | context) for a context of exactly K tokens, oldest first.
func (m *MarkovSource) Prob(context []int32, next int32) float64 {
	return m.probs[m.state(context)][next]
}

func (m *MarkovSource) state(ctx []int32) int {
	s := 0
	for _, c := range ctx {
		s = s*m.A + int(c)
	}
	return s
}

// EntropyRate is H = Σ_s π(s) H(P(·|s)) in nats per character: the lowest
// mean cross-entropy any predictor reaches with unlimited context.
func (m *MarkovSource) EntropyRate() float64 {
	h := 0.0
	for s, ps := range m.prefix[m.K] {
		h += ps * entropy(m.probs[s])
	}
	return h
}

// ConditionalEntropy is H(X_{j+1} | X_1..X_j) under the stationary law, for
// j = 0..K (j = 0 is the unigram entropy, j = K the entropy rate).
func (m *MarkovSource) ConditionalEntropy(j int) float64 {
	if j >= m.K {
		return m.EntropyRate()
	}
	// H(X_1..X_{j+1}) - H(X_1..X_j)
	return entropy(m.prefix[j+1]) - m.jointEntropy(j)
}

func (m *MarkovSource) jointEntropy(j int) float64 {
	if j == 0 {
		return 0
	}
	return entropy(m.prefix[j])
}

// UnigramEntropy is the entropy of the stationary character frequencies:
// the best loss of a model that ignores context.
func (m *MarkovSource) UnigramEntropy() float64 { return m.ConditionalEntropy(0) }

// BlockBound is the best mean loss over a window of T predictions where the
// prediction at position t sees t+1 characters (as a GPT with block size T
// does): Σ_t H(X | min(t+1, K) previous characters) / T.
func (m *MarkovSource) BlockBound(T int) float64 {
	sum := 0.0
	for t := range T {
		sum += m.ConditionalEntropy(min(t+1, m.K))
	}
	return sum / float64(T)
}

// WindowLoss is the mean of -log P(targets[t] | idx[..t]) under the source,
// with at most K characters of context and, like a GPT, none from before
// the window: the loss of the ideal model on exactly these tokens.
func (m *MarkovSource) WindowLoss(idx, targets []int32) float64 {
	sum := 0.0
	for t := range targets {
		lo := max(0, t+1-m.K)
		ctx := idx[lo : t+1]
		var p float64
		if len(ctx) == m.K {
			p = m.Prob(ctx, targets[t])
		} else {
			j := len(ctx)
			s := m.state(ctx)
			p = m.prefix[j+1][s*m.A+int(targets[t])] / m.prefix[j][s]
		}
		sum -= math.Log(p)
	}
	return sum / float64(len(targets))
}

// Generate draws n tokens from the chain, starting from a context drawn
// after a burn-in of 1000 steps; reproducible from seed.
func (m *MarkovSource) Generate(n int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0x67656e6572617465)) // "generate"
	states := len(m.probs)
	s := rng.IntN(states)
	out := make([]int32, 0, n)
	for i := range n + 1000 {
		var c int32
		if rng.Float64() < m.Spec.Escape {
			c = int32(rng.IntN(m.A))
		} else {
			u := rng.Float64()
			j := 0
			for j < m.K && u >= m.mixCum[j] {
				j++
			}
			c = m.tables[j][m.tableRow(s, j)].draw(rng.Float64())
		}
		s = (s*m.A + int(c)) % states
		if i >= 1000 {
			out = append(out, c)
		}
	}
	return out
}

// Text decodes tokens of this source to characters.
func (m *MarkovSource) Text(ids []int32) string {
	r := make([]rune, len(ids))
	for i, id := range ids {
		r[i] = m.Symbols[id]
	}
	return string(r)
}

// entropy is -Σ p log p in nats.
func entropy(p []float64) float64 {
	h := 0.0
	for _, x := range p {
		if x > 0 {
			h -= x * math.Log(x)
		}
	}
	return h
}
