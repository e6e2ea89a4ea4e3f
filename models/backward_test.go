package models

import (
	"math"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
	"gptlab/precision"
)

// TestBackwardReading: the backward of y = x·w reads x to make dw; handed
// a bf16 round trip of x instead, it gives exactly the dw of the rounded
// x (computed from an x rounded beforehand), and not the exact dw (the
// negative control), while the forward still sees x.
func TestBackwardReading(t *testing.T) {
	const m, k, n = 6, 10, 4
	x := make([]float32, m*k)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*1.3)) * 1.7
	}
	rounded := make([]float32, len(x))
	bits := make([]uint16, len(x))
	precision.EncodeBF16(bits, x)
	precision.DecodeBF16(rounded, bits)

	dw := func(xs []float32, viaBF16 bool) (grad, y []float32) {
		g := G.NewGraph()
		in := func(name string, d []float32, s ...int) *G.Node {
			return G.NewTensor(g, tensor.Float32, len(s), G.WithShape(s...), G.WithName(name),
				G.WithValue(tensor.New(tensor.WithShape(s...), tensor.WithBacking(slices.Clone(d)))))
		}
		w := make([]float32, k*n)
		for i := range w {
			w[i] = float32(i%5) - 2
		}
		xn, wn := in("x", xs, m, k), in("w", w, k, n)
		yn := G.Must(arena.MatMul(xn, wn, false, false))         // (m, n)
		dy := in("dy", slices.Repeat([]float32{0.5}, m*n), m, n) // (m, n)
		read := func(v *G.Node) (*G.Node, error) {
			if v != xn || !viaBF16 {
				return v, nil
			}
			low, err := arena.Cast(v, arena.F32, arena.BF16)
			if err != nil {
				return nil, err
			}
			return arena.Cast(low, arena.BF16, arena.F32)
		}
		gs, err := BackwardReading(G.Nodes{yn}, G.Nodes{dy}, G.Nodes{wn}, read, nil)
		if err != nil {
			t.Fatal(err)
		}
		vm := G.NewTapeMachine(g)
		defer vm.Close()
		if err := vm.RunAll(); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(gs[0].Value().Data().([]float32)), slices.Clone(yn.Value().Data().([]float32))
	}
	got, y := dw(x, true)
	want, _ := dw(rounded, false)
	exact, yExact := dw(x, false)
	if !slices.Equal(got, want) {
		t.Error("dw read through the bf16 round trip differs from dw of the rounded x")
	}
	if slices.Equal(got, exact) {
		t.Error("dw read through the bf16 round trip equals the exact dw: the substitution was not read")
	}
	if !slices.Equal(y, yExact) {
		t.Error("the forward changed: it must read x itself")
	}
}
