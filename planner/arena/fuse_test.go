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

// TestRoundTripFused: a sum cast down to bf16 and straight back up runs
// as the sum rounded in place (no cast runs, no bf16 copy is planned), and
// gives the bits of the program running both casts; the cast up, retained
// or not, stands for the rounded sum. A sum that something else reads too
// keeps its casts (rounding it in place would change what that reader
// sees), and so does one whose bf16 copy is retained: the negative
// controls. WhenRounding sees the sum before it is rounded, and refuses a
// sum that is not.
func TestRoundTripFused(t *testing.T) {
	const rows, cols = 64, 33
	vals := func(seed float64) []float32 {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(math.Sin(float64(i)*seed)*3) + float32(i%7)/3
		}
		return v
	}
	build := func(shared, saved bool) (*gorgonia.ExprGraph, []*gorgonia.Node, *gorgonia.Node, *gorgonia.Node, *gorgonia.Node) {
		g := gorgonia.NewGraph()
		x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(rows, cols), gorgonia.WithName("x"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(vals(1)))))
		y := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(rows, cols), gorgonia.WithName("y"),
			gorgonia.WithValue(tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(vals(0.37)))))
		sum := gorgonia.Must(Add(x, y))
		down := gorgonia.Must(Cast(sum, F32, BF16))
		up := gorgonia.Must(Cast(down, BF16, F32))
		out := gorgonia.Must(Add(up, x))
		retain := []*gorgonia.Node{out, up}
		if saved {
			retain = append(retain, down)
		}
		if shared {
			retain = append(retain, gorgonia.Must(Add(sum, y)))
		}
		return g, retain, sum, down, up
	}
	var before []float32 // the sum as WhenRounding saw it
	run := func(shared, saved, keep bool) (*Program, []*gorgonia.Node, *gorgonia.Node, *gorgonia.Node, *gorgonia.Node) {
		g, retain, sum, down, up := build(shared, saved)
		p, err := Compile(context.Background(), g, retain, Options{InPlace: true, KeepCasts: keep})
		if err != nil {
			t.Fatal(err)
		}
		before = nil
		err = p.WhenRounding([]*gorgonia.Node{sum}, func(int) { before = slices.Clone(p.Value(sum).Data().([]float32)) })
		if trip := !shared && !saved && !keep; (err == nil) != trip || p.RoundsInPlace(sum) != trip {
			t.Fatalf("shared %v, saved %v, every cast %v: WhenRounding(sum) = %v, RoundsInPlace %v", shared, saved, keep, err, p.RoundsInPlace(sum))
		}
		if err := p.RunGuarded(); err != nil {
			t.Fatal(err)
		}
		return p, retain, sum, down, up
	}
	bits := func(p *Program, n *gorgonia.Node) []uint32 { // a value's bits, bf16 or f32
		var out []uint32
		if b, _ := p.Buf(n); b.Dtype == BF16 {
			for _, v := range b.U16 {
				out = append(out, uint32(v))
			}
			return out
		}
		for _, v := range p.Value(n).Data().([]float32) {
			out = append(out, math.Float32bits(v))
		}
		return out
	}
	data := func(p *Program, n *gorgonia.Node) []float32 { return p.Value(n).Data().([]float32) }
	for _, c := range []struct{ shared, saved bool }{{false, false}, {false, true}, {true, false}} {
		pf, rf, sum, down, up := run(c.shared, c.saved, false)
		seen := before
		pk, rk, _, _, _ := run(c.shared, c.saved, true)
		for i := range rf {
			if !slices.Equal(bits(pf, rf[i]), bits(pk, rk[i])) {
				t.Errorf("%+v: retained %v differs from the program running every cast", c, rf[i])
			}
		}
		_, downRuns := pf.RunsOp(down)
		_, upRuns := pf.RunsOp(up)
		if c.shared || c.saved {
			if !downRuns || !upRuns || pf.Steps() != pk.Steps() {
				t.Errorf("%+v: casts run %v, %v, steps %d and %d; want the casts kept", c, downRuns, upRuns, pf.Steps(), pk.Steps())
			}
			continue
		}
		if downRuns || upRuns || pf.Steps() != pk.Steps()-2 {
			t.Errorf("casts run %v, %v; steps %d, %d with every cast: want the round trip fused", downRuns, upRuns, pf.Steps(), pk.Steps())
		}
		su, _ := pf.StepOf(up)
		ss, _ := pf.StepOf(sum)
		if su != ss {
			t.Errorf("the cast up is final at step %d, its sum at %d", su, ss)
		}
		x, y := vals(1), vals(0.37)
		if len(seen) != len(x) {
			t.Fatalf("WhenRounding saw %d values of the sum, want %d", len(seen), len(x))
		}
		for i, v := range data(pf, up) {
			if want := precision.FromBF16(precision.ToBF16(x[i] + y[i])); math.Float32bits(v) != math.Float32bits(want) {
				t.Fatalf("rounded sum [%d] = %v, want %v", i, v, want)
			}
			if math.Float32bits(seen[i]) != math.Float32bits(x[i]+y[i]) {
				t.Fatalf("WhenRounding saw the sum [%d] as %v, want %v unrounded", i, seen[i], x[i]+y[i])
			}
		}
		prob, _ := pf.Problem()
		for _, b := range prob.Buffers {
			if b.Size == rows*cols*BF16.Size() {
				t.Errorf("a bf16 buffer is planned: %v", prob.Buffers)
			}
		}
	}
}
