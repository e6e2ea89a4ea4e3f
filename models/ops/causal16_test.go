package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
	"gptlab/precision"
)

// TestCausalReadsBF16: the causal products and CausalSoftmaxGrad given
// either input, or both, as bf16 bits (a fused cast's readers) give the
// bits they give on the cast up, bound as the arena binds them and
// through Do as its fallback runs them; items as (N, T, d) and as heads
// in place, T over partial row blocks, on each BLAS.
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
				t.Run(fmt.Sprintf("T=%d/H=%d/%v", T, h.H, causalOp{kind: kind}), func(t *testing.T) {
					op := causalOp{kind: kind, scale: scale, heads: h}
					if kind.scores() {
						check(t, op, tt, x16, x32, y16, y32)
					} else {
						check(t, op, ops, l16, l32, y16, y32)
					}
				})
			}
		}
		t.Run(fmt.Sprintf("T=%d/CausalSoftmaxGrad", T), func(t *testing.T) {
			p16, p32 := pair(tt, lower)
			dp16, dp32 := pair(tt, normal)
			check(t, causalSoftmaxOp{scale: scale, grad: true}, tt, p16, p32, dp16, dp32)
		})
	}
}
