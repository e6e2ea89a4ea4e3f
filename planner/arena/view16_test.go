package arena

import (
	"context"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/precision"
)

// TestViewOf16BitValue: an alias of a bf16 value is a bf16 view of the
// same storage (no buffer of its own), and a cast of the alias back up is
// a node of its own beside the cast of the value itself (mixed
// precision's backward reads its saved activations that way).
func TestViewOf16BitValue(t *testing.T) {
	x := []float32{1.00390625, -3.3, 65504, 1e-3, 7}
	g := gorgonia.NewGraph()
	in := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(len(x)), gorgonia.WithName("x"),
		gorgonia.WithValue(tensor.New(tensor.WithShape(len(x)), tensor.WithBacking(slices.Clone(x)))))
	low := gorgonia.Must(Cast(in, F32, BF16))
	up := gorgonia.Must(Cast(low, BF16, F32))
	alias := gorgonia.Must(Alias(low, 1))
	again := gorgonia.Must(Cast(alias, BF16, F32))
	if again == up {
		t.Fatal("the cast of the alias was merged with the cast of the value")
	}
	p, err := Compile(context.Background(), g, []*gorgonia.Node{up, again}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunGuarded(); err != nil {
		t.Fatal(err)
	}
	if dt, _ := p.Dtype(alias); dt != BF16 {
		t.Errorf("Dtype(alias) = %v, want bf16", dt)
	}
	if bl, ba := bufIndex(t, p, low), bufIndex(t, p, alias); bl != ba {
		t.Errorf("the alias has buffer %d, its value %d: want the same storage", ba, bl)
	}
	want := make([]float32, len(x))
	for i, v := range x {
		want[i] = precision.FromBF16(precision.ToBF16(v))
	}
	for _, n := range []*gorgonia.Node{up, again} {
		if got := p.Value(n).Data().([]float32); !slices.Equal(got, want) {
			t.Errorf("%v = %v, want %v", n, got, want)
		}
	}
}

func bufIndex(t *testing.T, p *Program, n *gorgonia.Node) int {
	t.Helper()
	b, ok := p.BufferOf(n)
	if !ok {
		t.Fatalf("%v has no buffer", n)
	}
	return b
}
