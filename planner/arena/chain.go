package arena

import (
	"fmt"
	"math/rand/v2"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Chain builds the chapter's matrix chain A0·A1·…·An-1 in float64,
// multiplied left to right, so each product is a temporary that only the
// next product reads. Matrix i is dims[i]×dims[i+1], uniform in
// [-0.5, 0.5) from seed. It returns the graph and the final product.
func Chain(dims []int, seed uint64) (*gorgonia.ExprGraph, *gorgonia.Node) {
	r := rand.New(rand.NewPCG(seed, 2))
	g := gorgonia.NewGraph()
	var acc *gorgonia.Node
	for i := 0; i+1 < len(dims); i++ {
		data := make([]float64, dims[i]*dims[i+1])
		for j := range data {
			data[j] = r.Float64() - 0.5
		}
		m := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(dims[i], dims[i+1]),
			gorgonia.WithName(fmt.Sprintf("A%d", i)),
			gorgonia.WithValue(tensor.New(tensor.WithShape(dims[i], dims[i+1]), tensor.WithBacking(data))))
		if acc == nil {
			acc = m
		} else {
			acc = gorgonia.Must(MatMul(acc, m, false, false))
		}
	}
	return g, acc
}
