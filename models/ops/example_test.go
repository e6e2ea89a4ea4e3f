package ops

import "fmt"

func ExampleDropoutMask() {
	const layer, site = 0, 1 // the attention probabilities of layer 0 (models.SiteAttn)
	a := make([]float32, 8)
	DropoutMask(a, 0.5, 1, 7, layer, site)
	b := make([]float32, 8)
	DropoutMask(b, 0.5, 1, 7, layer, site) // the same counters: the same mask, no stored state
	fmt.Println(a)
	fmt.Println(maxAbsDiff(a, b) == 0)
	// Output:
	// [0 0 0 0 0 2 2 0]
	// true
}
