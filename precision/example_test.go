package precision_test

import (
	"fmt"
	"math"

	"gptlab/precision"
)

func ExampleToBF16() {
	negZero := float32(math.Copysign(0, -1))
	for _, x := range []float32{1, 1 + 1.0/256, 1 + 3.0/256, 3.4e38, negZero} {
		fmt.Printf("%g -> %#04x -> %g\n", x, precision.ToBF16(x), precision.FromBF16(precision.ToBF16(x)))
	}
	// Output:
	// 1 -> 0x3f80 -> 1
	// 1.0039062 -> 0x3f80 -> 1
	// 1.0117188 -> 0x3f82 -> 1.015625
	// 3.4e+38 -> 0x7f80 -> +Inf
	// -0 -> 0x8000 -> -0
}

func ExampleEncodeFP16() {
	src := []float32{65504, 65520, 1e-8, 6e-8}
	h := make([]uint16, len(src))
	precision.EncodeFP16(h, src)
	fmt.Printf("%#04x\n", h)
	precision.EncodeFP16Sat(h, src)
	fmt.Printf("%#04x\n", h)
	back := make([]float32, len(h))
	precision.DecodeFP16(back, h)
	fmt.Println(back)
	// Output:
	// [0x7bff 0x7c00 0x0000 0x0001]
	// [0x7bff 0x7bff 0x0000 0x0001]
	// [65504 65504 0 5.9604645e-08]
}

func ExampleParsePolicy() {
	p, _ := precision.ParsePolicy("fp16")
	fmt.Println(p)
	_, err := precision.ParsePolicy("fp8")
	fmt.Println(err)
	// Output:
	// fp16 (activations fp16, weights fp16, gradients fp16, accumulate f32, master f32, loss scaling)
	// precision: unknown precision policy "fp8" (want one of f32, bf16, fp16, fp16-noscale)
}

func ExampleScaler() {
	s, _ := precision.NewScaler(precision.DefaultScalerConfig())
	grads := []float32{65536, -32768} // the gradients of the scaled loss
	fmt.Println(s.ScaleLoss(0.5), s.Unscale(grads), grads, s.Update(), s.Scale())
	grads = []float32{float32(math.Inf(1)), 1}
	fmt.Println(s.Unscale(grads), s.Update(), s.Scale())
	// Output:
	// 32768 true [1 -0.5] false 65536
	// false true 32768
}

func ExampleQuantizeInt8() {
	// Two output channels of a [out, in] weight: channel j is row j.
	w := []float32{
		0.5, -1.27, 0.0625, 1.0,
		0, 0, 0, 0, // an all-zero channel: scale 0, exact zeros back
	}
	q, scales, err := precision.QuantizeInt8("c_fc.weight", w, 2, 4, precision.Int8PerChannel)
	if err != nil {
		fmt.Println(err)
		return
	}
	back := make([]float32, len(w))
	precision.DequantizeInt8(back, q, scales, 2, 4, precision.Int8PerChannel)
	fmt.Println(q, scales)
	fmt.Println(back)
	w[3] = float32(math.NaN())
	_, _, err = precision.QuantizeInt8("c_fc.weight", w, 2, 4, precision.Int8PerChannel)
	fmt.Println(err)
	// Output:
	// [50 -127 6 100 0 0 0 0] [0.01 0]
	// [0.5 -1.27 0.06 1 0 0 0 0]
	// precision: c_fc.weight: non-finite value NaN at (0, 3): refusing to quantize
}
