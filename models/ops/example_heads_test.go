package ops

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Why this output: one sequence (B = 1) of T = 2 tokens, H = 2 heads of
// width 1, so column h of q, k and v is head h. Head 0 has q = (1, 2) and
// k = (0, 1): token 0 sees only itself (probability 1), token 1 scores
// 2·0 = 0 and 2·1 = 2, softmax (1/(1+e²), e²/(1+e²)) = (0.1192, 0.8808).
// Head 1 has q = (0, 1), k = (1, 1): token 1 scores 1 and 1, so (0.5,
// 0.5). Times v: head 0 gives 10 and 0.1192·10 + 0.8808·20 = 18.808, head
// 1 gives 100 and 150, each written back into its own column.
func ExampleCausalProbsHeads() {
	g := G.NewGraph()
	rows := func(name string, x ...float32) *G.Node {
		v := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking(x))
		return G.NewMatrix(g, G.Float32, G.WithShape(2, 2), G.WithName(name), G.WithValue(v))
	}
	q := rows("q", 1, 0, 2, 1) // (B*T, C): token 0's heads, then token 1's
	k := rows("k", 0, 1, 1, 1)
	v := rows("v", 10, 100, 20, 200)
	p, err := CausalProbsHeads(q, k, 2, 2, 1) // (B*H, T, T)
	if err != nil {
		panic(err)
	}
	y, err := CausalApplyHeads(p, v, 2) // (B*T, C)
	if err != nil {
		panic(err)
	}
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		panic(err)
	}
	fmt.Println(p.Value().Data())
	fmt.Println(y.Value().Data())
	// Output:
	// [1 0 0.11920292 0.8807971 1 0 0.5 0.5]
	// [10 100 18.807972 150]
}
