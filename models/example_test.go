package models

import "fmt"

func ExampleDropoutMask() {
	a := make([]float32, 8)
	DropoutMask(a, 0.5, 1, 7, 0, SiteAttn)
	b := make([]float32, 8)
	DropoutMask(b, 0.5, 1, 7, 0, SiteAttn) // the same counters: the same mask, no stored state
	fmt.Println(a)
	fmt.Println(maxAbsDiff(a, b) == 0)
	// Output:
	// [0 0 0 0 0 2 2 0]
	// true
}
