package vec_test

import (
	"fmt"

	"gptlab/internal/vec"
)

func ExampleAdd() {
	a := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	b := []float32{10, 20, 30, 40, 50, 60, 70, 80, 90}
	vec.Add(a, a, b) // a residual add in place
	fmt.Println(a)
	// Output: [11 22 33 44 55 66 77 88 99]
}

func ExampleAddRow() {
	x := []float32{ // (2, 3)
		1, 2, 3,
		4, 5, 6,
	}
	bias := []float32{0.5, -1, 10} // (3)
	out := make([]float32, len(x))
	vec.AddRow(out, x, bias)
	fmt.Println(out)
	// Output: [1.5 1 13 4.5 4 16]
}

func ExampleAccumF64() {
	// A bias gradient: the sum over rows of dout, accumulated in float64.
	dout := []float32{ // (3, 2)
		1e8, 1,
		1, 2,
		-1e8, 3,
	}
	acc := make([]float64, 2)
	for r := 0; r < len(dout); r += 2 {
		vec.AccumF64(acc, dout[r:r+2])
	}
	fmt.Println(acc)
	// Output: [1 6]
}

func ExampleAdamW_Update() {
	// The first step (t = 1) of AdamW with lr 0.1, betas (0.9, 0.95),
	// eps 1e-8, no weight decay: every weight moves by about -lr*sign(g).
	s := vec.AdamW{
		Decay:    1,
		Clip:     1,
		B1:       0.9,
		C1:       0.1,
		B2:       0.95,
		C2:       0.05,
		Bc2Sqrt:  0.2236068, // sqrt(1 - 0.95^1)
		Eps:      1e-8,
		StepSize: 1, // lr / (1 - 0.9^1)
	}
	w := []float32{1, 1, 1}
	g := []float32{0.5, -2, 0}
	m, v := make([]float32, 3), make([]float32, 3)
	s.Update(w, g, m, v)
	fmt.Printf("w %.4f\nm %.4f\nv %.4f\n", w, m, v)
	// Output:
	// w [0.9000 1.1000 1.0000]
	// m [0.0500 -0.2000 0.0000]
	// v [0.0125 0.2000 0.0000]
}
