package vec_test

import (
	"fmt"
	"math"

	"gptlab/internal/vec"
)

// ExampleLNRow normalises one row as LayerNorm does: the statistics from
// Moments, then the affine row.
func ExampleLNRow() {
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	w := []float32{1, 1, 1, 1, 1, 2, 2, 2, 2, 2}
	b := make([]float32, len(x))
	s, ss := vec.Moments(x)
	n := float64(len(x))
	mean := s / n
	rstd := 1 / math.Sqrt(max(ss/n-mean*mean, 0)+1e-5)
	fmt.Printf("Σx = %g, Σx² = %g, mean = %g\n", s, ss, mean)
	vec.LNRow(x, x, w, b, mean, rstd) // in place
	fmt.Printf("%.4f\n", x)
	// Output:
	// Σx = 55, Σx² = 385, mean = 5.5
	// [-1.5667 -1.2185 -0.8704 -0.5222 -0.1741 0.3482 1.0445 1.7408 2.4371 3.1334]
}

// ExampleLNGradXRow computes LayerNorm's input gradient for one row: the
// row sums, the means of g and g·xhat, then dx.
func ExampleLNGradXRow() {
	x := []float32{0, 1, 2, 3}
	w := []float32{1, 1, 1, 1}
	dy := []float32{1, 1, 1, 1} // a constant gradient: LayerNorm removes it
	sx, sxx, sg, sgx := vec.LNGradSums(x, w, dy)
	n := float64(len(x))
	mean := sx / n
	rstd := 1 / math.Sqrt(max(sxx/n-mean*mean, 0)+1e-5)
	sgx = rstd * (sgx - mean*sg) / n // mean of g·xhat
	sg /= n                          // mean of g
	dx := make([]float32, len(x))
	vec.LNGradXRow(dx, x, w, dy, mean, rstd, sg, sgx)
	fmt.Println(dx)
	// Output:
	// [0 0 0 0]
}

// ExampleLNGradWAccum sums LayerNorm's weight gradient dy·xhat over two
// rows in float64.
func ExampleLNGradWAccum() {
	rows := [][]float32{{1, 3}, {10, 20}} // (2, C=2): xhat = -1, +1 in both
	dys := [][]float32{{0.5, 0.25}, {1, 2}}
	acc := make([]float64, 2)
	for r, x := range rows {
		s, ss := vec.Moments(x)
		mean := s / 2
		rstd := 1 / math.Sqrt(ss/2-mean*mean) // no eps, for round numbers
		vec.LNGradWAccum(acc, x, dys[r], mean, rstd)
	}
	fmt.Println(acc)
	// Output: [-1.5 2.25]
}
