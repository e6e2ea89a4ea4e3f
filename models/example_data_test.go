package models

import "fmt"

func ExampleMarkovSource() {
	src, _ := NewMarkovSource(DefaultCorpusSpec(), 1)
	fmt.Printf("unigram %.3f, one-char context %.3f, entropy rate %.3f nats/char\n",
		src.UnigramEntropy(), src.ConditionalEntropy(1), src.EntropyRate())
	fmt.Printf("best mean loss over a 16-char window: %.3f\n", src.BlockBound(16))
	// Output:
	// unigram 3.038, one-char context 1.908, entropy rate 1.468 nats/char
	// best mean loss over a 16-char window: 1.496
}

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
