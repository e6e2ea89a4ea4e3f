package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
)

// TestCausalHeadsInPlace: each causal op and the fused core with its (T, d)
// operands as heads in place gives the bits of SplitHeads, the op on items
// and MergeHeads, on each BLAS, over T spanning partial row blocks; every
// output element is written (the NaN fill never leaks) and the float64
// path is the items' reference permuted. The items' op run on the unsplit
// rows differs (the control: the layout is read).
func TestCausalHeadsInPlace(t *testing.T) { onEachBLAS(t, testCausalHeadsInPlace) }

func testCausalHeadsInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const B, H, d, scale = 3, 4, 8, 0.35
	buf := func(s tensor.Shape, fill func(i int) float32) arena.Buf {
		b := arena.Buf{Dtype: arena.F32, F32: make([]float32, s.TotalSize()), Shape: s}
		for i := range b.F32 {
			b.F32[i] = fill(i)
		}
		return b
	}
	nan := func(int) float32 { return float32(math.NaN()) }
	for _, T := range []int{1, 7, causalRows, 2*causalRows + 5} {
		rows, items, tt := tensor.Shape{B * T, H * d}, tensor.Shape{B * H, T, d}, tensor.Shape{B * H, T, T}
		split := headsOp{B: B, T: T, H: H}
		merge := headsOp{B: B, T: T, H: H, merge: true}
		normal := func(int) float32 { return float32(r.NormFloat64()) }
		lower := func(i int) float32 { // zero above each item's diagonal, as l must be
			if i%T > i/T%T {
				return 0
			}
			return float32(r.NormFloat64())
		}
		x, y, l := buf(rows, normal), buf(rows, normal), buf(tt, lower)
		xs, ys := runOp(t, split, buf(items, nan), x), runOp(t, split, buf(items, nan), y)
		for _, kind := range []causalKind{causalScores, causalProbs, causalApply, causalApplyT} {
			t.Run(fmt.Sprintf("T=%d/%v", T, causalOp{kind: kind}), func(t *testing.T) {
				itemOp := causalOp{kind: kind, scale: scale}
				headOp := causalOp{kind: kind, scale: scale, heads: heads{H: H, T: T}}
				a, as := x, xs
				if !kind.scores() {
					a, as = l, l
				}
				outs, err := headOp.check([]tensor.Shape{a.Shape, y.Shape})
				if err != nil {
					t.Fatal(err)
				}
				got := runOp(t, headOp, buf(outs, nan), a, y)
				var want arena.Buf
				if kind.scores() {
					want = runOp(t, itemOp, buf(tt, nan), as, ys)
				} else {
					want = runOp(t, merge, buf(rows, nan), runOp(t, itemOp, buf(items, nan), as, ys))
				}
				if !slices.Equal(math32bits(got.F32), math32bits(want.F32)) {
					t.Fatalf("heads in place differ from split, op, merge")
				}
				if kind.scores() && T > 1 { // the control: the items' op on the rows as they are
					ctl := runOp(t, itemOp, buf(tt, nan), withShape(a, tensor.Shape{B * H, T, d}), withShape(y, items))
					if slices.Equal(math32bits(ctl.F32), math32bits(want.F32)) {
						t.Fatalf("the items' op on unsplit rows gave the heads' result: the test cannot fail")
					}
				}
				// float64: the heads' reference is the items' reference of the split operands
				g64 := make([]float64, outs.TotalSize())
				headOp.reference(g64, f64(a.F32), f64(y.F32), B*H, T, d)
				w64 := make([]float64, outs.TotalSize())
				itemOp.reference(w64, f64(as.F32), f64(ys.F32), B*H, T, d)
				if !kind.scores() {
					w64 = merge64(w64, B, T, H, d)
				}
				if !slices.Equal(g64, w64) {
					t.Fatalf("float64: heads in place differ from the items' reference")
				}
			})
		}
		for _, masked := range []bool{false, true} {
			t.Run(fmt.Sprintf("T=%d/CausalAttend/masked=%v", T, masked), func(t *testing.T) {
				v := buf(rows, normal)
				vs := runOp(t, split, buf(items, nan), v)
				in, ins := []arena.Buf{x, y, v}, []arena.Buf{xs, ys, vs}
				if masked {
					m := buf(tt, func(int) float32 { return float32(r.IntN(2)) * 1.25 })
					in, ins = append(in, m), append(ins, m)
				}
				got := runOp(t, causalAttendOp{scale: scale, masked: masked, heads: heads{H: H, T: T}}, buf(rows, nan), in...)
				want := runOp(t, merge, buf(rows, nan), runOp(t, causalAttendOp{scale: scale, masked: masked}, buf(items, nan), ins...))
				if !slices.Equal(math32bits(got.F32), math32bits(want.F32)) {
					t.Fatalf("heads in place differ from split, CausalAttend, merge")
				}
			})
		}
	}
}

// TestCausalHeadsBadShapes: the heads' layout names what is wrong with a
// shape that does not fit it.
func TestCausalHeadsBadShapes(t *testing.T) {
	l := heads{H: 4, T: 8}
	for _, tc := range []struct {
		name   string
		scores bool
		x, y   tensor.Shape
	}{
		{"rows not a multiple of T", true, tensor.Shape{20, 32}, tensor.Shape{20, 32}},
		{"columns not a multiple of H", true, tensor.Shape{16, 30}, tensor.Shape{16, 30}},
		{"q and k differ", true, tensor.Shape{16, 32}, tensor.Shape{16, 16}},
		{"items not B*H", false, tensor.Shape{4, 8, 8}, tensor.Shape{16, 32}},
		{"items not (T, T)", false, tensor.Shape{8, 8, 7}, tensor.Shape{16, 32}},
	} {
		if _, err := l.check(causalOp{kind: causalApply, heads: l}, tc.scores, tc.x, tc.y); err == nil {
			t.Errorf("%s: %v and %v accepted", tc.name, tc.x, tc.y)
		}
	}
	if s, err := l.check(causalOp{kind: causalApply, heads: l}, false, tensor.Shape{8, 8, 8}, tensor.Shape{16, 32}); err != nil || !s.Eq(tensor.Shape{16, 32}) {
		t.Errorf("a good apply: %v, %v", s, err)
	}
}

func withShape(b arena.Buf, s tensor.Shape) arena.Buf { b.Shape = s; return b }

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// merge64 is MergeHeads of float64 items (B*H, T, d).
func merge64(x []float64, B, T, H, d int) []float64 {
	y := make([]float64, len(x))
	for i := range B * H {
		b, h := i/H, i%H
		for t := range T {
			copy(y[(b*T+t)*H*d+h*d:][:d], x[(i*T+t)*d:][:d])
		}
	}
	return y
}

// TestCausalHeadsGraph: the constructors build nodes of the layout's
// shapes, with and without a mask, and refuse a T or H below 1 and an l
// that is not (B*H, T, T).
func TestCausalHeadsGraph(t *testing.T) {
	g := G.NewGraph()
	m := func(name string, s ...int) *G.Node {
		return G.NewTensor(g, G.Float32, len(s), G.WithShape(s...), G.WithName(name))
	}
	q, k, v, mask := m("q", 6, 4), m("k", 6, 4), m("v", 6, 8), m("mask", 4, 3, 3)
	p, err := CausalProbsHeads(q, k, 3, 2, 0.5)
	if err != nil || !p.Shape().Eq(tensor.Shape{4, 3, 3}) {
		t.Fatalf("CausalProbsHeads: %v, %v", p, err)
	}
	if y, err := CausalApplyHeads(p, v, 2); err != nil || !y.Shape().Eq(tensor.Shape{6, 8}) {
		t.Fatalf("CausalApplyHeads: %v, %v", y, err)
	}
	for _, mk := range []*G.Node{nil, mask} {
		if y, err := CausalAttendHeads(q, k, v, mk, 3, 2, 0.5); err != nil || !y.Shape().Eq(tensor.Shape{6, 8}) {
			t.Fatalf("CausalAttendHeads (mask %v): %v, %v", mk, y, err)
		}
	}
	if _, err := CausalProbsHeads(q, k, 0, 2, 0.5); err == nil {
		t.Errorf("T = 0 accepted")
	}
	if _, err := CausalAttendHeads(q, k, v, nil, 3, 0, 0.5); err == nil {
		t.Errorf("H = 0 accepted")
	}
	if _, err := CausalApplyHeads(q, v, 2); err == nil { // l must be (B*H, T, T)
		t.Errorf("a 2-D l accepted")
	}
}
