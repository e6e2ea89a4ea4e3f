package qgemm_test

import (
	"fmt"

	"gptlab/internal/qgemm"
	"gptlab/precision"
)

func Example() {
	// W [N=2, K=4], nanoGPT's [out, in]; y = x·Wᵀ.
	w := []float32{
		1, 0.5, -0.25, 0,
		-1, 2, 0, 0.125,
	}
	q, scales, err := precision.QuantizeInt8("w", w, 2, 4, precision.Int8PerChannel)
	if err != nil {
		fmt.Println(err)
		return
	}
	packed, err := qgemm.NewWeights(2, 4, q, scales, precision.Int8PerChannel)
	if err != nil {
		fmt.Println(err)
		return
	}
	x := []float32{1, 2, 4, 8} // (M=1, K=4)
	y := make([]float32, 2)
	qgemm.WeightOnly(y, x, 1, packed)
	fmt.Printf("weight-only %.3f\n", y)
	qgemm.Dynamic(y, x, 1, packed)
	fmt.Printf("dynamic     %.3f\n", y)
	fmt.Println(packed.Bytes(), "bytes") // padded to a panel of 16 channels and a depth of 16
	// Output:
	// weight-only [1.000 4.000]
	// dynamic     [1.008 4.024]
	// 384 bytes
}
