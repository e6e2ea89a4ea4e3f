package arena

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// branches builds out = (x·W1)·W2 + (x·W3)·W4: two independent chains,
// each with a large temporary (x·W1, x·W3: 32x256) and a small result.
func branches(t testing.TB) (g *gorgonia.ExprGraph, x *gorgonia.Node, ops map[string]*gorgonia.Node) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	g = gorgonia.NewGraph()
	in := func(name string, s ...int) *gorgonia.Node {
		d := make([]float32, tensor.Shape(s).TotalSize())
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
		return gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(s...), gorgonia.WithName(name),
			gorgonia.WithValue(tensor.New(tensor.WithShape(s...), tensor.WithBacking(d))))
	}
	x = in("x", 32, 16)
	w1, w2, w3, w4 := in("w1", 16, 256), in("w2", 256, 8), in("w3", 16, 256), in("w4", 256, 8)
	ops = map[string]*gorgonia.Node{}
	ops["a1"] = gorgonia.Must(MatMul(x, w1, false, false))
	ops["a2"] = gorgonia.Must(MatMul(ops["a1"], w2, false, false))
	ops["b1"] = gorgonia.Must(MatMul(x, w3, false, false))
	ops["b2"] = gorgonia.Must(MatMul(ops["b1"], w4, false, false))
	ops["out"] = gorgonia.Must(Add(ops["a2"], ops["b2"]))
	return g, x, ops
}

// TestExplicitOrder: the plan follows the order given. Finishing one
// branch before starting the other keeps one large temporary live at a
// time; starting both first keeps two: a larger bound and arena, the same
// result bitwise, and every op at its place in the order.
func TestExplicitOrder(t *testing.T) {
	seq := func(ops map[string]*gorgonia.Node, names ...string) []*gorgonia.Node {
		var out []*gorgonia.Node
		for _, n := range names {
			out = append(out, ops[n])
		}
		return out
	}
	var results [][]float32
	var bounds []int64
	for _, order := range [][]string{{"a1", "a2", "b1", "b2", "out"}, {"a1", "b1", "a2", "b2", "out"}} {
		g, _, ops := branches(t)
		p, err := Compile(context.Background(), g, []*gorgonia.Node{ops["out"]}, Options{Order: seq(ops, order...)})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.RunGuarded(); err != nil {
			t.Fatal(err)
		}
		for i, name := range order {
			if s, ok := p.StepOf(ops[name]); !ok || s != i {
				t.Errorf("order %v: %s runs at step %d, want %d", order, name, s, i)
			}
		}
		results = append(results, slices.Clone(floats(p.Value(ops["out"]))))
		bounds = append(bounds, p.Stats().BoundBytes)
	}
	if !slices.Equal(results[0], results[1]) {
		t.Error("the two orders compute different results")
	}
	big := int64(32 * 256 * 4)
	if bounds[0] >= 2*big || bounds[1] < 2*big {
		t.Errorf("bound %d bytes branch by branch, %d interleaved: want one %d-byte temporary live at a time, then two", bounds[0], bounds[1], big)
	}
}

// TestOrderRejected: an order that leaves out a needed op, repeats one,
// runs one before its input or names an input is refused, saying why.
func TestOrderRejected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node
		want  string
	}{
		{"missing", func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node {
			return []*gorgonia.Node{o["a1"], o["a2"], o["b1"], o["out"]}
		}, "computes later or not at all"},
		{"before its input", func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node {
			return []*gorgonia.Node{o["a2"], o["a1"], o["b1"], o["b2"], o["out"]}
		}, "computes later"},
		{"twice", func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node {
			return []*gorgonia.Node{o["a1"], o["a2"], o["a1"], o["b1"], o["b2"], o["out"]}
		}, "again"},
		{"an input", func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node {
			return []*gorgonia.Node{x, o["a1"], o["a2"], o["b1"], o["b2"], o["out"]}
		}, "is an input"},
		{"left out", func(x *gorgonia.Node, o map[string]*gorgonia.Node) []*gorgonia.Node {
			return []*gorgonia.Node{o["a1"], o["a2"]}
		}, "leaves out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, x, ops := branches(t)
			_, err := Compile(context.Background(), g, []*gorgonia.Node{ops["out"]}, Options{Order: tc.order(x, ops)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
