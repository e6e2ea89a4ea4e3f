package ops

import (
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/precision"
)

// TestReadsBF16OutsideTheArena: the ops that read a fused cast's bf16
// value (Gemm16, ColSum, GELU, GELUGrad) give, through Do as the arena's fallback runs
// them, the bits they give on the cast up, whichever operands come as
// uint16.
func TestReadsBF16OutsideTheArena(t *testing.T) {
	const m, k, n = 37, 19, 11
	vals := func(size, skip int) ([]uint16, []float32) { // benchData's values from skip on
		x := benchData(size + skip)[skip:]
		x16, up := make([]uint16, size), make([]float32, size)
		precision.EncodeBF16(x16, x)
		precision.DecodeBF16(up, x16)
		return x16, up
	}
	a16, a := vals(m*k, 0)
	b16, b := vals(n*k, 1)
	f32 := func(x []float32, s ...int) G.Value { return tensor.New(tensor.WithShape(s...), tensor.WithBacking(x)) }
	u16 := func(x []uint16, s ...int) G.Value { return tensor.New(tensor.WithShape(s...), tensor.WithBacking(x)) }
	op := gemm16Op{transB: true} // (m, k)·(n, k)ᵀ
	want, err := op.Do(f32(a, m, k), f32(b, n, k))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := colSumOp{}.Do(f32(a, m, k))
	if err != nil {
		t.Fatal(err)
	}
	const g = 3*geluGrain + 77 // rows of the GELU split, the last ragged
	g16, gx := vals(g, 0)
	d16, dy := vals(g, 1)
	gelu, err := geluOp{}.Do(f32(gx, g))
	if err != nil {
		t.Fatal(err)
	}
	grad := geluOp{grad: true}
	dgelu, err := grad.Do(f32(gx, g), gelu, f32(dy, g))
	if err != nil {
		t.Fatal(err)
	}
	y16 := make([]uint16, g)
	precision.EncodeBF16(y16, gelu.Data().([]float32)) // not read by GELUGrad
	for _, tc := range []struct {
		name string
		op   G.Op
		in   []G.Value
		want G.Value
	}{
		{"Gemm16(bf16, f32)", op, []G.Value{u16(a16, m, k), f32(b, n, k)}, want},
		{"Gemm16(f32, bf16)", op, []G.Value{f32(a, m, k), u16(b16, n, k)}, want},
		{"Gemm16(bf16, bf16)", op, []G.Value{u16(a16, m, k), u16(b16, n, k)}, want},
		{"ColSum(bf16)", colSumOp{}, []G.Value{u16(a16, m, k)}, sum},
		{"GELU(bf16)", geluOp{}, []G.Value{u16(g16, g)}, gelu},
		{"GELUGrad(bf16, bf16, bf16)", grad, []G.Value{u16(g16, g), u16(y16, g), u16(d16, g)}, dgelu},
		{"GELUGrad(f32, bf16, bf16)", grad, []G.Value{f32(gx, g), u16(y16, g), u16(d16, g)}, dgelu},
		{"GELUGrad(bf16, f32, f32)", grad, []G.Value{u16(g16, g), gelu, f32(dy, g)}, dgelu},
	} {
		got, err := tc.op.Do(tc.in...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g, w := got.Data().([]float32), tc.want.Data().([]float32)
		if j := bitsEqual(g, w); j >= 0 || !got.Shape().Eq(tc.want.Shape()) {
			t.Errorf("%s: shape %v, want %v; first difference at %d", tc.name, got.Shape(), tc.want.Shape(), j)
		}
	}
}
