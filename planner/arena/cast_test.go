package arena

import (
	"context"
	"math"
	"slices"
	"testing"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/precision"
)

// TestCastPlannedAtItsSize: a cast of a float32 tensor to bf16, fp16 and
// int8 lives in the arena at 2, 2 and 1 bytes an element; the arena holds
// the rounded values (read back as their bits), the cast back up gives
// them as float32, and the TapeMachine computes the same bits.
func TestCastPlannedAtItsSize(t *testing.T) {
	const rows, cols = 64, 33 // 2112 elements: not a multiple of any vector width
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))*300) + float32(i%7)/3
	}
	x[0], x[1], x[2] = float32(math.NaN()), float32(math.Inf(-1)), 1e-30
	for _, to := range []Dtype{BF16, FP16, Int8} {
		t.Run(to.String(), func(t *testing.T) {
			build := func() (*gorgonia.ExprGraph, *gorgonia.Node, *gorgonia.Node) {
				g := gorgonia.NewGraph()
				in := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(rows, cols), gorgonia.WithName("x"),
					gorgonia.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(slices.Clone(x)))))
				low := gorgonia.Must(Cast(in, F32, to))
				back := gorgonia.Must(Cast(low, to, F32))
				return g, low, back
			}
			g, low, back := build()
			p, err := Compile(context.Background(), g, []*gorgonia.Node{low, back}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.RunGuarded(); err != nil {
				t.Fatal(err)
			}
			lt, _ := p.Dtype(low)
			if lt != to {
				t.Fatalf("the cast's value is %v, want %v", lt, to)
			}
			prob, _ := p.Problem()
			var sizes []int64
			for _, b := range prob.Buffers {
				sizes = append(sizes, b.Size)
			}
			n := int64(rows * cols)
			if want := []int64{n * to.Size(), n * 4}; !slices.Equal(sizes, want) {
				t.Errorf("planned buffers %v bytes, want %v (the cast at %d bytes an element, then f32)", sizes, want, to.Size())
			}
			lb, ok := p.Buf(low)
			if !ok || lb.Dtype != to {
				t.Fatalf("Buf(cast) = %v, %v", lb.Dtype, ok)
			}
			want := make([]float32, n)
			switch to {
			case BF16:
				bits := make([]uint16, n)
				precision.EncodeBF16(bits, x)
				if !slices.Equal(lb.U16, bits) {
					t.Error("the arena's bf16 bits are not precision.EncodeBF16's")
				}
				precision.DecodeBF16(want, bits)
			case FP16:
				bits := make([]uint16, n)
				precision.EncodeFP16(bits, x)
				if !slices.Equal(lb.U16, bits) {
					t.Error("the arena's fp16 bits are not precision.EncodeFP16's")
				}
				precision.DecodeFP16(want, bits)
			case Int8:
				for i, v := range x {
					want[i] = float32(max(-128, min(127, math.RoundToEven(float64(v)))))
					if v != v {
						want[i] = 0
					}
					if float32(lb.I8[i]) != want[i] {
						t.Fatalf("int8[%d] = %d, want %v (from %v)", i, lb.I8[i], want[i], v)
					}
				}
			}
			got := floats(p.Value(back))
			same := func(a, b float32) bool { return a == b || a != a && b != b }
			changed := 0
			for i := range want {
				if !same(got[i], want[i]) {
					t.Fatalf("back[%d] = %v, want %v", i, got[i], want[i])
				}
				if !same(got[i], x[i]) {
					changed++
				}
			}
			if changed < int(n)/2 {
				t.Errorf("only %d of %d values changed by the round trip: the cast did not round", changed, n)
			}
			g2, _, back2 := build()
			vm := gorgonia.NewTapeMachine(g2)
			defer vm.Close()
			if err := vm.RunAll(); err != nil {
				t.Fatal(err)
			}
			for i, v := range floats(back2.Value()) {
				if !same(v, got[i]) {
					t.Fatalf("TapeMachine back[%d] = %v, arena %v", i, v, got[i])
				}
			}
		})
	}
	if _, err := Cast(nil, BF16, FP16); err == nil {
		t.Error("Cast(bf16 -> fp16): no error")
	}
}

// TestCastUpGradientOfCastUp: the gradient of a cast up from a 16-bit
// type is the cast down of its gradient, except where that gradient is a
// cast up from the same type: then it is the 16-bit value itself (no
// cast: narrowing a widened value gives its bits back). A float32
// gradient, or one widened from the other 16-bit type, is cast down.
func TestCastUpGradientOfCastUp(t *testing.T) {
	g := gorgonia.NewGraph()
	node := func(name string, d Dtype) *gorgonia.Node {
		return gorgonia.NewMatrix(g, d.Tensor(), gorgonia.WithShape(4, 8), gorgonia.WithName(name))
	}
	low := node("low", BF16)
	up := gorgonia.Must(Cast(low, BF16, F32))
	g16 := node("g16", BF16)
	f16 := node("f16", FP16)
	for _, tc := range []struct {
		name     string
		grad     *gorgonia.Node
		identity bool
	}{
		{"widened bf16", gorgonia.Must(Cast(g16, BF16, F32)), true},
		{"float32", node("g32", F32), false},
		{"widened fp16", gorgonia.Must(Cast(f16, FP16, F32)), false},
	} {
		d, err := up.Op().(CastOp).SymDiff(gorgonia.Nodes{low}, up, tc.grad)
		if err != nil {
			t.Fatal(err)
		}
		c, isCast := d[0].Op().(CastOp)
		switch {
		case tc.identity && d[0] != g16:
			t.Errorf("%s: gradient %v, want the bf16 value g16 itself", tc.name, d[0])
		case !tc.identity && (!isCast || c.From != F32 || c.To != BF16):
			t.Errorf("%s: gradient %v, want a Cast{f32→bf16} of it", tc.name, d[0])
		}
	}
}
