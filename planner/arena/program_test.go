package arena

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	_ "go4.org/unsafe/assume-no-moving-gc"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner"
)

// mlp builds loss = mean((tanh(x·W1)·W2 + x·W3ᵀ)²) with gradients for the
// weights, all float32, with values drawn from seed: this package's ops
// (MatMul, Add, Reshape) beside gorgonia's own (Tanh, Square, Mean, and
// the Add of gorgonia.Grad's accumulation), which the arena runs through
// their UsePreallocDo or Do.
func mlp(t testing.TB, seed uint64) (g *gorgonia.ExprGraph, loss *gorgonia.Node, grads gorgonia.Nodes) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	fill := func(shape ...int) *tensor.Dense {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(r.NormFloat64()) * 0.3
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
	g = gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(8, 5), gorgonia.WithName("x"), gorgonia.WithValue(fill(8, 5)))
	w1 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(5, 7), gorgonia.WithName("w1"), gorgonia.WithValue(fill(5, 7)))
	w2 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(7, 5), gorgonia.WithName("w2"), gorgonia.WithValue(fill(7, 5)))
	w3 := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(5, 5), gorgonia.WithName("w3"), gorgonia.WithValue(fill(5, 5)))
	h := gorgonia.Must(gorgonia.Tanh(gorgonia.Must(MatMul(x, w1, false, false))))                                  // (8, 7)
	y := gorgonia.Must(Add(gorgonia.Must(MatMul(h, w2, false, false)), gorgonia.Must(MatMul(x, w3, false, true)))) // (8, 5)
	flat := gorgonia.Must(Reshape(y, 40))                                                                          // (40) a view of y
	loss = gorgonia.Must(gorgonia.Mean(gorgonia.Must(gorgonia.Square(flat))))
	grads, err := gorgonia.Grad(loss, w1, w2, w3)
	if err != nil {
		t.Fatal(err)
	}
	return g, loss, grads
}

func floats(v gorgonia.Value) []float32 {
	switch x := v.(type) {
	case *tensor.Dense:
		return x.Data().([]float32)
	case *gorgonia.F32:
		return []float32{float32(*x)}
	}
	return nil
}

// TestMatchesTapeMachine: the arena run gives bitwise the TapeMachine's
// loss and gradients, twice in a row (the second run reuses the arena),
// with every planner and with and without in-place ops.
func TestMatchesTapeMachine(t *testing.T) {
	g, loss, grads := mlp(t, 3)
	vm := gorgonia.NewTapeMachine(g)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := [][]float32{append([]float32(nil), floats(loss.Value())...)}
	for _, gr := range grads {
		want = append(want, append([]float32(nil), floats(gr.Value())...))
	}
	vm.Close()

	for _, algo := range planner.Algorithms() {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/inplace=%v", algo.Name, inPlace), func(t *testing.T) {
				g2, loss2, grads2 := mlp(t, 3)
				p, err := Compile(context.Background(), g2, append(gorgonia.Nodes{loss2}, grads2...), Options{Algorithm: algo, InPlace: inPlace})
				if err != nil {
					t.Fatal(err)
				}
				for run := 0; run < 2; run++ {
					if err := p.RunGuarded(); err != nil {
						t.Fatal(err)
					}
					got := [][]float32{floats(p.Value(loss2))}
					for _, gr := range grads2 {
						got = append(got, floats(p.Value(gr)))
					}
					for i := range want {
						if len(got[i]) != len(want[i]) {
							t.Fatalf("run %d output %d: %d values, want %d", run, i, len(got[i]), len(want[i]))
						}
						for j := range want[i] {
							if got[i][j] != want[i][j] {
								t.Fatalf("run %d output %d[%d] = %v, TapeMachine %v", run, i, j, got[i][j], want[i][j])
							}
						}
					}
				}
				st := p.Stats()
				if inPlace && st.InPlace == 0 {
					t.Errorf("no op ran in place")
				}
				if st.ArenaBytes < st.BoundBytes {
					t.Errorf("arena %d bytes below the lower bound %d", st.ArenaBytes, st.BoundBytes)
				}
				if algo.Name != "independent" && st.ArenaBytes >= st.NaiveBytes {
					t.Errorf("arena %d bytes, naive %d: no reuse", st.ArenaBytes, st.NaiveBytes)
				}
			})
		}
	}
}
