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

// TestCausalAttend: the fused core gives the bits of CausalProbs, the
// mask's product and CausalApply run as three kernels, with and without a
// mask, over T spanning partial row blocks and items split across the
// pool; the output's previous contents (NaN) never leak. One mask element
// on or below the diagonal changed changes the output (the control), and
// the float64 path is the three references.
func TestCausalAttend(t *testing.T) { onEachBLAS(t, testCausalAttend) }

func testCausalAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const scale = 0.17677669529663687
	for _, T := range []int{1, 5, causalRows - 1, causalRows, causalRows + 1, 3*causalRows + 7} {
		for _, masked := range []bool{false, true} {
			t.Run(fmt.Sprintf("T=%d/masked=%v", T, masked), func(t *testing.T) {
				const N, d, dv = 9, 32, 24
				qs, vs, ts := tensor.Shape{N, T, d}, tensor.Shape{N, T, dv}, tensor.Shape{N, T, T}
				buf := func(s tensor.Shape, fill func() float32) arena.Buf {
					b := arena.Buf{Dtype: arena.F32, F32: make([]float32, s.TotalSize()), Shape: s}
					for i := range b.F32 {
						b.F32[i] = fill()
					}
					return b
				}
				normal := func() float32 { return float32(2 * r.NormFloat64()) }
				nan := func() float32 { return float32(math.NaN()) }
				drop := func() float32 { // dropout's mask: 0 or 1/(1-p)
					if r.Float64() < 0.2 {
						return 0
					}
					return 1 / 0.8
				}
				q, k, v, mask := buf(qs, normal), buf(qs, normal), buf(vs, normal), buf(ts, drop)
				probs, dropped, want := buf(ts, nan), buf(ts, nan), buf(vs, nan)
				runOp(t, causalOp{kind: causalProbs, scale: scale}, probs, q, k)
				in := []arena.Buf{q, k, v}
				if masked {
					f, ok := arena.ElemOp{Product: true, Mask: true}.BindKernel(dropped, []arena.Buf{probs, mask})
					if !ok {
						t.Fatal("the mask's product did not bind")
					}
					f()
					in = append(in, mask)
				} else {
					dropped = probs
				}
				runOp(t, causalOp{kind: causalApply}, want, dropped, v)
				op := causalAttendOp{scale: scale, masked: masked}
				got := buf(vs, nan)
				runOp(t, op, got, in...)
				if !slices.Equal(math32bits(got.F32), math32bits(want.F32)) {
					t.Fatalf("not bitwise the three ops' output")
				}
				if masked && T > 1 { // the control: the last query's likeliest key dropped or kept the other way
					row := (N*T - 1) * T
					last := probs.F32[row : row+T]
					i := row + slices.Index(last, slices.Max(last))
					mask.F32[i] = 1.25 - mask.F32[i]
					runOp(t, op, got, in...)
					if slices.Equal(math32bits(got.F32), math32bits(want.F32)) {
						t.Errorf("a changed mask element left the output unchanged")
					}
				}
			})
		}
	}
	// float64: the three ops' references, through Do
	const N, T, d = 2, 7, 3
	vals := make([]G.Value, 4)
	for i, s := range []tensor.Shape{{N, T, d}, {N, T, d}, {N, T, d}, {N, T, T}} {
		x := make([]float64, s.TotalSize())
		for j := range x {
			x[j] = r.NormFloat64()
		}
		vals[i] = tensor.New(tensor.WithShape(s...), tensor.WithBacking(x))
	}
	got, err := causalAttendOp{scale: 0.5, masked: true}.Do(vals...)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := causalOp{kind: causalProbs, scale: 0.5}.Do(vals[0], vals[1])
	pm := p.Data().([]float64)
	for i, m := range vals[3].Data().([]float64) {
		pm[i] *= m
	}
	want, _ := causalOp{kind: causalApply}.Do(p, vals[2])
	if !slices.Equal(got.Data().([]float64), want.Data().([]float64)) {
		t.Errorf("float64: %v, want %v", got.Data(), want.Data())
	}
}

// TestCausalAttendBadInput: shapes the op refuses, and a bad scale.
func TestCausalAttendBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		masked bool
		in     []tensor.Shape
	}{
		{"k of another length", false, []tensor.Shape{{2, 4, 3}, {2, 5, 3}, {2, 4, 3}}},
		{"v of another batch", false, []tensor.Shape{{2, 4, 3}, {2, 4, 3}, {3, 4, 3}}},
		{"mask not (N, T, T)", true, []tensor.Shape{{2, 4, 3}, {2, 4, 3}, {2, 4, 3}, {2, 4, 3}}},
		{"a missing mask", true, []tensor.Shape{{2, 4, 3}, {2, 4, 3}, {2, 4, 3}}},
	} {
		if _, err := (causalAttendOp{scale: 1, masked: tc.masked}).check(tc.in); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	g := G.NewGraph()
	x := G.NewTensor(g, G.Float32, 3, G.WithShape(1, 2, 2), G.WithName("x"))
	for _, sc := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if _, err := CausalAttend(x, x, x, nil, sc); err == nil {
			t.Errorf("scale %v: accepted", sc)
		}
	}
}
