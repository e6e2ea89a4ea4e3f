package models

import (
	"fmt"
	"math"
)

// The embedded corpus's source and the best loss any model can reach on it.
//
// The first line is the seeded chain's own (a random chain: no closed
// form); the lines after it check what makes those numbers right.
// Conditioning cannot raise entropy, and no distribution over the 24
// characters has more than log 24 = 3.178 nats. The entropy rate is
// computed from the transition rows and their stationary law, while
// Generate draws from the mixture tables directly: by the
// Shannon-McMillan-Breiman theorem a long sample's mean -log P comes to the
// rate (200,000 characters: a standard error of about 0.002). The
// window bound is its definition: the first prediction of a window sees one
// character, the other 15 the chain's whole order-2 context.
func ExampleMarkovSource() {
	src, _ := NewMarkovSource(DefaultCorpusSpec(), 1)
	h0, h1, h := src.UnigramEntropy(), src.ConditionalEntropy(1), src.EntropyRate()
	fmt.Printf("unigram %.3f, one-char context %.3f, entropy rate %.3f nats/char\n", h0, h1, h)
	fmt.Println("log 24 >= unigram >= one-char >= rate:", math.Log(24) >= h0 && h0 >= h1 && h1 >= h)
	ids := src.Generate(200_000, 2)
	var nll float64
	for t := 2; t < len(ids); t++ {
		nll -= math.Log(src.Prob(ids[t-2:t], ids[t]))
	}
	fmt.Println("a sample's mean -log P within 0.01 of the rate:", math.Abs(nll/float64(len(ids)-2)-h) < 0.01)
	bb := src.BlockBound(16)
	fmt.Printf("best mean loss over a 16-char window: %.3f, (H1 + 15 H)/16: %v\n", bb, math.Abs(bb-(h1+15*h)/16) < 1e-12)
	// Output:
	// unigram 3.038, one-char context 1.908, entropy rate 1.468 nats/char
	// log 24 >= unigram >= one-char >= rate: true
	// a sample's mean -log P within 0.01 of the rate: true
	// best mean loss over a 16-char window: 1.496, (H1 + 15 H)/16: true
}

// By the formula (Schedule): step 0 is in the warmup, 1e-3 · 1/100 · 1 =
// 1e-5; step 99 ends it, 1e-3 · (0.1 + 0.45·(1 + cos(0.0495π))) =
// 1e-3 · 0.99457; step 1000 is half way, cos(π/2) = 0: 1e-3 · 0.55; step
// 1999 is the last, cos(0.9995π) = -0.9999988: 1e-3 · 0.1000006.
func ExampleSchedule() {
	s := Schedule{LR: 1e-3, Warmup: 100, Iters: 2000}
	for _, it := range []int{0, 99, 1000, 1999} {
		fmt.Printf("step %4d: lr %.3g\n", it, s.At(it))
	}
	// Output:
	// step    0: lr 1e-05
	// step   99: lr 0.000995
	// step 1000: lr 0.00055
	// step 1999: lr 0.0001
}
