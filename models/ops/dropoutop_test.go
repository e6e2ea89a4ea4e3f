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

// maskedRef is x ⊙ DropoutMask(s) under key k: the product with the mask
// in memory that the Dropout op replaces.
func maskedRef(x []float32, s DropoutSite) []float32 {
	m := make([]float32, len(x))
	DropoutMask(m, s.P, s.Key.Seed, s.Key.Step, s.Layer, s.Site)
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = v * m[i]
	}
	return y
}

// TestDropoutOp: the op's kernel gives the bits of x times DropoutMask's
// mask, over lengths spanning its split's blocks, in place and not; the
// TapeMachine's run of the node gives them too; a key of the next step
// gives another mask (the control: the key is read when the op runs).
func TestDropoutOp(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	key := &DropoutKey{Seed: 11, Step: 5}
	for _, n := range []int{1, 17, dropoutGrain, 3*dropoutGrain + 5, 50_000} {
		for _, p := range []float64{0, 0.1, 0.5} {
			t.Run(fmt.Sprintf("n=%d/p=%v", n, p), func(t *testing.T) {
				s := DropoutSite{Key: key, P: p, Layer: 2, Site: 1}
				x := arena.Buf{Dtype: arena.F32, F32: make([]float32, n), Shape: tensor.Shape{n}}
				for i := range x.F32 {
					x.F32[i] = float32(r.NormFloat64())
				}
				x.F32[0] = float32(math.Copysign(0, -1))
				want := maskedRef(x.F32, s)
				out := arena.Buf{Dtype: arena.F32, F32: make([]float32, n), Shape: x.Shape}
				f, err := dropoutOp{site: s}.bind(out, []arena.Buf{x})
				if err != nil {
					t.Fatal(err)
				}
				f()
				if !slices.Equal(math32bits(out.F32), math32bits(want)) {
					t.Fatalf("the kernel's product differs from x ⊙ DropoutMask")
				}
				if p > 0 && n > 1 { // the control: the same bound kernel under the next step's key
					key.Step++
					f()
					key.Step--
					if slices.Equal(math32bits(out.F32), math32bits(want)) {
						t.Fatalf("the next step's key gave the same product: the key is not read")
					}
				}
				in := arena.Buf{Dtype: arena.F32, F32: slices.Clone(x.F32), Shape: x.Shape}
				runOp(t, dropoutOp{site: s}, in, in) // in place
				if !slices.Equal(math32bits(in.F32), math32bits(want)) {
					t.Fatalf("in place: the product differs from x ⊙ DropoutMask")
				}
				g := G.NewGraph()
				xn := G.NewTensor(g, G.Float32, 1, G.WithShape(n), G.WithName("x"),
					G.WithValue(tensor.New(tensor.WithShape(n), tensor.WithBacking(slices.Clone(x.F32)))))
				y, err := Dropout(xn, s)
				if err != nil {
					t.Fatal(err)
				}
				vm := G.NewTapeMachine(g)
				defer vm.Close()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(math32bits(y.Value().Data().([]float32)), math32bits(want)) {
					t.Fatalf("the TapeMachine's product differs from x ⊙ DropoutMask")
				}
			})
		}
	}
}

// TestDropoutGradient: the gradient of Dropout(x, s) is Dropout of the
// incoming gradient at the same site (the same mask).
func TestDropoutGradient(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, G.Float32, G.WithShape(3, 4), G.WithName("x"))
	dy := G.NewMatrix(g, G.Float32, G.WithShape(3, 4), G.WithName("dy"))
	s := DropoutSite{Key: &DropoutKey{1, 2}, P: 0.2, Layer: 3, Site: 0}
	y, err := Dropout(x, s)
	if err != nil {
		t.Fatal(err)
	}
	d, err := y.Op().(G.SDOp).SymDiff(G.Nodes{x}, y, dy)
	if err != nil {
		t.Fatal(err)
	}
	it := g.From(d[0].ID())
	one := it.Len() == 1
	it.Next()
	op, ok := d[0].Op().(dropoutOp)
	if !ok || op.site != s || !one || it.Node().(*G.Node) != dy {
		t.Fatalf("gradient %v, want Dropout{%v}(dy)", d[0].Op(), s)
	}
}

// TestDropoutBadSite: a site without a key, a p outside [0, 1) or a site
// past 255 is refused with an error.
func TestDropoutBadSite(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, G.Float32, G.WithShape(2, 2), G.WithName("x"))
	k := &DropoutKey{}
	for _, s := range []DropoutSite{{P: 0.1}, {Key: k, P: 1}, {Key: k, P: -0.1}, {Key: k, P: math.NaN()}, {Key: k, Site: 256}, {Key: k, Layer: -1}} {
		if _, err := Dropout(x, s); err == nil {
			t.Errorf("Dropout accepted site %+v", s)
		}
	}
}

// TestCausalAttendDropout: the fused core with its dropout drawn in the
// kernel gives the bits of the fused core reading DropoutMask's mask, on
// each BLAS, and its float64 path those of the masked reference.
func TestCausalAttendDropout(t *testing.T) { onEachBLAS(t, testCausalAttendDropout) }

func testCausalAttendDropout(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const B, H, d, scale = 2, 3, 4, 0.4
	for _, T := range []int{1, 7, causalRows + 3} {
		rows, tt := tensor.Shape{B * T, H * d}, tensor.Shape{B * H, T, T}
		buf := func(s tensor.Shape) arena.Buf {
			b := arena.Buf{Dtype: arena.F32, F32: make([]float32, s.TotalSize()), Shape: s}
			for i := range b.F32 {
				b.F32[i] = float32(r.NormFloat64())
			}
			return b
		}
		q, k, v := buf(rows), buf(rows), buf(rows)
		s := DropoutSite{Key: &DropoutKey{Seed: 2, Step: 9}, P: 0.3, Layer: 1, Site: 1}
		mask := arena.Buf{Dtype: arena.F32, F32: make([]float32, tt.TotalSize()), Shape: tt}
		DropoutMask(mask.F32, s.P, s.Key.Seed, s.Key.Step, s.Layer, s.Site)
		l := heads{H: H, T: T}
		got := runOp(t, causalAttendOp{scale: scale, drop: &s, heads: l}, buf(rows), q, k, v)
		want := runOp(t, causalAttendOp{scale: scale, masked: true, heads: l}, buf(rows), q, k, v, mask)
		if !slices.Equal(math32bits(got.F32), math32bits(want.F32)) {
			t.Fatalf("T=%d: the mask drawn in the kernel differs from DropoutMask's read", T)
		}
		vals := func(bs ...arena.Buf) []G.Value {
			var vs []G.Value
			for _, b := range bs {
				vs = append(vs, tensor.New(tensor.WithShape(b.Shape...), tensor.WithBacking(f64(b.F32))))
			}
			return vs
		}
		g64, w64 := make([]float64, rows.TotalSize()), make([]float64, rows.TotalSize())
		causalAttendOp{scale: scale, drop: &s, heads: l}.reference(g64, vals(q, k, v))
		causalAttendOp{scale: scale, masked: true, heads: l}.reference(w64, vals(q, k, v, mask))
		if !slices.Equal(g64, w64) {
			t.Fatalf("T=%d: float64: the drawn mask differs from DropoutMask's", T)
		}
	}
	g := G.NewGraph()
	m := func(name string, s ...int) *G.Node {
		return G.NewTensor(g, G.Float32, len(s), G.WithShape(s...), G.WithName(name))
	}
	s := DropoutSite{Key: &DropoutKey{}, P: 0.1}
	if y, err := CausalAttendHeadsDropout(m("q", 6, 4), m("k", 6, 4), m("v", 6, 8), s, 3, 2, 0.5); err != nil || !y.Shape().Eq(tensor.Shape{6, 8}) {
		t.Fatalf("CausalAttendHeadsDropout: %v, %v", y, err)
	}
	if _, err := CausalAttendHeadsDropout(m("q2", 6, 4), m("k2", 6, 4), m("v2", 6, 8), DropoutSite{P: 0.1}, 3, 2, 0.5); err == nil {
		t.Errorf("CausalAttendHeadsDropout accepted a site without a key")
	}
}

// TestDropoutSiteFirst: the op at a site starting at element First
// multiplies by the site's whole mask from that element on, so a tensor
// holding a batch's later sequences gets their masks in the whole batch
// (the control: the same part from element 0 differs).
func TestDropoutSiteFirst(t *testing.T) {
	const n, first = 3000, 1200
	key := &DropoutKey{Seed: 2, Step: 9}
	whole := make([]float32, first+n)
	DropoutMask(whole, 0.25, key.Seed, key.Step, 1, 3)
	for _, tc := range []struct {
		first int
		want  bool // equal to the whole mask's elements first…
	}{{first, true}, {0, false}} {
		ones := arena.Buf{Dtype: arena.F32, F32: make([]float32, n), Shape: tensor.Shape{n}}
		for i := range ones.F32 {
			ones.F32[i] = 1
		}
		s := DropoutSite{Key: key, P: 0.25, Layer: 1, Site: 3, First: tc.first}
		runOp(t, dropoutOp{site: s}, ones, ones)
		if got := slices.Equal(ones.F32, whole[first:]); got != tc.want {
			t.Errorf("First %d: equal to the whole mask from %d: %v, want %v", tc.first, first, got, tc.want)
		}
	}
	if _, err := Dropout(nil, DropoutSite{Key: key, P: 0.1, First: -1}); err == nil {
		t.Error("a negative First was accepted")
	}
}
