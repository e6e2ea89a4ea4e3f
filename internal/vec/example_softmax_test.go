package vec_test

import (
	"fmt"
	"math"

	"gptlab/internal/vec"
)

// A softmax row and its cross-entropy loss: subtract the row's maximum
// inside the exponent, normalise by the sum, and read the loss of the
// target class off the logits.
func ExampleExpSum() {
	logits := []float32{2, 1, 0.5, -1, 3}
	const target = 4
	m := vec.Max(logits)
	p := make([]float32, len(logits))
	sum := vec.ExpSum(p, logits, 1, m) // p[j] = exp(logits[j] - m)
	vec.Scale(p, p, float32(1/sum))
	loss := math.Log(sum) - float64(logits[target]-m)
	fmt.Printf("max %v\n", m)
	fmt.Printf("probs %.4f\n", p)
	fmt.Printf("loss %.4f (-log p[%d] = %.4f)\n", loss, target, -math.Log(float64(p[target])))
	// Output:
	// max 3
	// probs [0.2294 0.0844 0.0512 0.0114 0.6236]
	// loss 0.4723 (-log p[4] = 0.4723)
}

// Dot gives the gradient's shortcut Σ p·dy of the softmax backward pass.
func ExampleDot() {
	p := []float32{0.5, 0.25, 0.25}
	dy := []float32{1, -2, 4}
	fmt.Println(vec.Dot(p, dy))
	// Output:
	// 1
}

func ExampleMax() {
	fmt.Println(vec.Max([]float32{-3, 7.5, 2, float32(math.Inf(-1))}))
	fmt.Println(vec.Max([]float32{1, float32(math.NaN()), 2}))
	// Output:
	// 7.5
	// NaN
}

// One row of causal attention's softmax: query 2 of a (T, T) row block
// sees keys 0 to 2; the row's later entries are zeroed.
func ExampleSoftmaxPrefix() {
	scores := []float32{2, 1, 0.5, 9, 9} // keys 3 and 4 are in the future
	p := make([]float32, len(scores))
	vec.SoftmaxPrefix(p, scores, 3, 1)
	fmt.Printf("%.4f\n", p)
	// Output:
	// [0.6285 0.2312 0.1402 0.0000 0.0000]
}
