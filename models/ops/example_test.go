package ops

import (
	"fmt"

	"gptlab/internal/testutil"
)

// Why this output: with p = 0.5 an element is dropped when the top 24 bits
// of its hash fall below 0.5·2^24 = 8,388,608, and kept as 1/(1-p) = 2
// otherwise. SplitMix64's finaliser, written out apart from this package
// (in Python, from the published constants) and folded as dropoutKey folds
// (seed 1, step 7, layer 0, site 1), gives the key 0xb8468fe9058ff1d0 and,
// for elements 0 … 7, the top 24 bits 2,689,731, 1,934,131, 6,562,835,
// 3,964,199, 1,328,853, 10,164,340, 11,746,695 and 8,100,399: below the
// threshold but for elements 5 and 6. Nothing is stored between the two
// calls, so the second gives the same mask.
func ExampleDropoutMask() {
	const layer, site = 0, 1 // the attention probabilities of layer 0 (models.SiteAttn)
	a := make([]float32, 8)
	DropoutMask(a, 0.5, 1, 7, layer, site)
	b := make([]float32, 8)
	DropoutMask(b, 0.5, 1, 7, layer, site) // the same counters: the same mask, no stored state
	fmt.Println(a)
	fmt.Println(testutil.MaxAbsDiff(a, b) == 0)
	// Output:
	// [0 0 0 0 0 2 2 0]
	// true
}
