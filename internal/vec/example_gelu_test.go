package vec_test

import (
	"fmt"

	"gptlab/internal/vec"
)

func ExampleGELU() {
	x := []float32{-3, -1, 0, 0.5, 1, 3}
	y := make([]float32, len(x))
	vec.GELU(y, x)
	fmt.Printf("%.5f\n", y)
	dx := make([]float32, len(x))
	vec.GELUGrad(dx, x, []float32{1, 1, 1, 1, 1, 1}) // dy = 1: the slopes
	fmt.Printf("%.5f\n", dx)
	// Output:
	// [-0.00405 -0.15866 0.00000 0.34573 0.84134 2.99595]
	// [-0.01195 -0.08332 0.50000 0.86750 1.08332 1.01195]
}
