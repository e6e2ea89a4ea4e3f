package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/bf16gemm"
	"gptlab/internal/sgemm"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// TestCausalReadsBF16: the causal products (float32 and BF16Products)
// and CausalSoftmaxGrad given either input, or both, as bf16 bits (a
// fused cast's readers) give the bits they give on the cast up, bound as
// the arena binds them and through Do as its fallback runs them; items as
// (N, T, d) and as heads in place, T over partial row blocks, on each
// BLAS.
func TestCausalReadsBF16(t *testing.T) { onEachBLAS(t, testCausalReadsBF16) }

func testCausalReadsBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const B, H, d, scale = 3, 4, 8, 0.35
	// pair is n values of fill rounded to bf16: the bits and their cast up.
	pair := func(s tensor.Shape, fill func(i int) float32) (arena.Buf, arena.Buf) {
		x32 := make([]float32, s.TotalSize())
		for i := range x32 {
			x32[i] = fill(i)
		}
		x16 := make([]uint16, len(x32))
		precision.EncodeBF16(x16, x32)
		precision.DecodeBF16(x32, x16)
		return arena.Buf{Dtype: arena.BF16, U16: x16, Shape: s}, arena.Buf{Dtype: arena.F32, F32: x32, Shape: s}
	}
	out := func(s tensor.Shape) arena.Buf {
		return arena.Buf{Dtype: arena.F32, F32: make([]float32, s.TotalSize()), Shape: s}
	}
	dense := func(b arena.Buf) G.Value {
		if b.Is(arena.BF16) {
			return tensor.New(tensor.WithShape(b.Shape...), tensor.WithBacking(b.U16))
		}
		return tensor.New(tensor.WithShape(b.Shape...), tensor.WithBacking(b.F32))
	}
	check := func(t *testing.T, op interface {
		binder
		Do(...G.Value) (G.Value, error)
	}, outShape tensor.Shape, x16, x32, y16, y32 arena.Buf) {
		want := runOp(t, op, out(outShape), x32, y32).F32
		for _, in := range [][2]arena.Buf{{x16, y32}, {x32, y16}, {x16, y16}} {
			name := fmt.Sprintf("%v(%v, %v)", op, in[0].Dtype, in[1].Dtype)
			if j := bitsEqual(runOp(t, op, out(outShape), in[0], in[1]).F32, want); j >= 0 {
				t.Errorf("%s bound: first difference at %d", name, j)
			}
			got, err := op.Do(dense(in[0]), dense(in[1]))
			if err != nil {
				t.Fatalf("%s: Do: %v", name, err)
			}
			if j := bitsEqual(got.Data().([]float32), want); j >= 0 || !got.Shape().Eq(outShape) {
				t.Errorf("%s through Do: shape %v, want %v; first difference at %d", name, got.Shape(), outShape, j)
			}
		}
	}
	normal := func(int) float32 { return float32(r.NormFloat64()) }
	for _, T := range []int{7, causalRows + 3} {
		lower := func(i int) float32 { // zero above each item's diagonal, as l must be
			if i%T > i/T%T {
				return 0
			}
			return float32(r.NormFloat64())
		}
		tt := tensor.Shape{B * H, T, T}
		for _, h := range []heads{{}, {H: H, T: T}} {
			ops := tensor.Shape{B * H, T, d} // (T, d) operands: items, or heads in place
			if h.H > 0 {
				ops = tensor.Shape{B * T, H * d}
			}
			x16, x32 := pair(ops, normal)
			y16, y32 := pair(ops, normal)
			l16, l32 := pair(tt, lower)
			for _, kind := range []causalKind{causalScores, causalProbs, causalApply, causalApplyT} {
				for _, bf16 := range []bool{false, true} {
					op := causalOp{kind: kind, scale: scale, heads: h, bf16: bf16}
					t.Run(fmt.Sprintf("T=%d/H=%d/%v", T, h.H, op), func(t *testing.T) {
						if kind.scores() {
							check(t, op, tt, x16, x32, y16, y32)
						} else {
							check(t, op, ops, l16, l32, y16, y32)
						}
					})
				}
			}
		}
		t.Run(fmt.Sprintf("T=%d/CausalSoftmaxGrad", T), func(t *testing.T) {
			p16, p32 := pair(tt, lower)
			dp16, dp32 := pair(tt, normal)
			check(t, causalSoftmaxOp{scale: scale, grad: true}, tt, p16, p32, dp16, dp32)
		})
	}
}

// TestCausalBF16Products: with BF16Products the causal products multiply
// bf16 operands with float32 sums, on each path bf16gemm has here: within
// float32 rounding of the float64 products of the operands rounded to
// bf16; on widen bit for bit the float32 ops on those rounded operands
// (sgemm's causal products on the same values); float32 inputs that are
// not bf16 values rounded to nearest even first (the negative control:
// the float32 op on them differs). Their gradients multiply so too.
func TestCausalBF16Products(t *testing.T) {
	defer G.Use(tensor.WhichBLAS())
	G.Use(sgemm.Implementation{})
	t.Cleanup(func() { _ = bf16gemm.SetPath("auto") })
	r := rand.New(rand.NewPCG(7, 8))
	const B, H, d, T, scale = 2, 3, 16, 29, 0.4
	h := heads{H: H, T: T}
	ops, tt := tensor.Shape{B * T, H * d}, tensor.Shape{B * H, T, T}
	buf := func(s tensor.Shape, fill func(i int) float32) arena.Buf {
		x := make([]float32, s.TotalSize())
		for i := range x {
			x[i] = fill(i)
		}
		return arena.Buf{Dtype: arena.F32, F32: x, Shape: s}
	}
	rounded := func(b arena.Buf) arena.Buf {
		x := slices.Clone(b.F32)
		precision.RoundBF16(x)
		return arena.Buf{Dtype: arena.F32, F32: x, Shape: b.Shape}
	}
	normal := func(int) float32 { return float32(r.NormFloat64()) }
	lower := func(i int) float32 {
		if i%T > i/T%T {
			return 0
		}
		return float32(r.NormFloat64())
	}
	x, y, l := buf(ops, normal), buf(ops, normal), buf(tt, lower)
	for _, path := range append(bf16gemm.Paths(), "auto") {
		if path == "amx" {
			continue // no causal kernel: as auto
		}
		if err := bf16gemm.SetPath(path); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []causalKind{causalScores, causalProbs, causalApply, causalApplyT} {
			op := causalOp{kind: kind, scale: scale, heads: h, bf16: true}
			t.Run(path+"/"+op.String(), func(t *testing.T) {
				a, outShape := x, tt
				if !kind.scores() {
					a, outShape = l, ops
				}
				out := func() arena.Buf { return buf(outShape, func(int) float32 { return 0 }) }
				got := runOp(t, op, out(), a, y).F32
				onRounded := runOp(t, op, out(), rounded(a), rounded(y)).F32
				if j := bitsEqual(got, onRounded); j >= 0 {
					t.Fatalf("float32 inputs are not rounded to bf16 first: first difference at %d", j)
				}
				f32 := causalOp{kind: kind, scale: scale, heads: h}
				if j := bitsEqual(runOp(t, f32, out(), a, y).F32, got); j < 0 {
					t.Fatalf("the float32 op on unrounded inputs gives the same bits: the rounding is not tested")
				}
				plain := runOp(t, f32, out(), rounded(a), rounded(y)).F32
				if path == "widen" {
					if j := bitsEqual(got, plain); j >= 0 {
						t.Fatalf("widen: first difference from the float32 op at %d: %v, %v", j, got[j], plain[j])
					}
				}
				if i, diff := maxRelDiff(got, plain); diff > 1e-5 {
					t.Fatalf("%.3g from the float32 products at %d: %v, %v", diff, i, got[i], plain[i])
				}
			})
		}
	}
	// The gradients of a BF16Products op are BF16Products ops.
	g := G.NewGraph()
	q := G.NewMatrix(g, tensor.Float32, G.WithShape(ops...), G.WithName("q"))
	k := G.NewMatrix(g, tensor.Float32, G.WithShape(ops...), G.WithName("k"))
	p, err := CausalProbsHeads(q, k, T, H, scale, BF16Products())
	if err != nil {
		t.Fatal(err)
	}
	grads, err := p.Op().(G.SDOp).SymDiff(G.Nodes{q, k}, p, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range grads {
		if !strings.HasSuffix(n.Op().String(), "{bf16}") {
			t.Errorf("gradient %v of %v: not on bf16 products", n.Op(), p.Op())
		}
	}
}

// maxRelDiff is the largest |a-b| over max(1, |b|) and where it is.
func maxRelDiff(a, b []float32) (at int, worst float64) {
	for i := range a {
		if d := math.Abs(float64(a[i])-float64(b[i])) / max(1, math.Abs(float64(b[i]))); d > worst || d != d {
			at, worst = i, d
		}
	}
	return at, worst
}

// TestCausalGradientsIn: CausalProbs with GradientsIn rounds the scores'
// gradient (a cast down and back up between the softmax's gradient and
// the products that read it); without it, no cast.
func TestCausalGradientsIn(t *testing.T) {
	for _, opts := range [][]CausalOption{nil, {GradientsIn(arena.BF16)}} {
		g := G.NewGraph()
		q := G.NewMatrix(g, tensor.Float32, G.WithShape(8, 4), G.WithName("q"))
		k := G.NewMatrix(g, tensor.Float32, G.WithShape(8, 4), G.WithName("k"))
		p, err := CausalProbsHeads(q, k, 4, 2, 0.5, opts...)
		if err != nil {
			t.Fatal(err)
		}
		grads, err := p.Op().(G.SDOp).SymDiff(G.Nodes{q, k}, p, p)
		if err != nil {
			t.Fatal(err)
		}
		casts := 0
		for _, n := range g.AllNodes() {
			if c, ok := n.Op().(arena.CastOp); ok && (c.From == arena.BF16 || c.To == arena.BF16) {
				casts++
			}
		}
		want := 0
		if opts != nil {
			want = 2
		}
		if casts != want || len(grads) != 2 {
			t.Errorf("options %d: %d casts to or from bf16 in the backward, want %d", len(opts), casts, want)
		}
	}
}
