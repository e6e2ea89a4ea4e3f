package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/sgemm"
	"gptlab/internal/testutil"
	"gptlab/planner/arena"
)

// benchData is n standard normal float32 values, reproducible.
func benchData(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// babyOp is one custom op on float32 inputs of the shapes it has in a
// training step of the baby config (B=12, T=64, C=128, H=4, V=65).
type babyOp struct {
	name string
	op   interface {
		G.Op
		G.UsePreallocDoer
	}
	in []G.Value
}

func babyOps() []babyOp {
	const B, T, C, H, V = 12, 64, 128, 4, 65
	const N = B * T
	dense := func(s ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(s...), tensor.WithBacking(benchData(prod(s))))
	}
	tg := make([]int, N)
	for i := range tg {
		tg[i] = (i * 7) % V
	}
	targets := tensor.New(tensor.WithShape(N), tensor.WithBacking(tg))
	x, w, bias, dy := dense(N, C), dense(C), dense(C), dense(N, C)
	f, df := dense(N, 4*C), dense(N, 4*C)
	fy, _ := (geluOp{}).Do(f)
	att, datt := dense(B*H, T, T), dense(B*H, T, T)
	scale := 0.17677669529663687
	p, _ := (causalSoftmaxOp{scale: scale}).Do(att)
	logits := dense(N, V)
	return []babyOp{
		{"AddBias", addBiasOp{}, []G.Value{x, bias}},
		{"ColSum", colSumOp{}, []G.Value{x}},
		{"ColSum4C", colSumOp{}, []G.Value{f}}, // the MLP's first bias
		{"LayerNorm", lnOp{}, []G.Value{x, w, bias}},
		{"LayerNormGradX", lnGradXOp{}, []G.Value{x, w, dy}},
		{"LayerNormGradW", lnGradWOp{}, []G.Value{x, dy}},
		{"GELU", geluOp{}, []G.Value{f}},
		{"GELUGrad", geluOp{grad: true}, []G.Value{f, fy, df}},
		{"SplitHeads", headsOp{B: B, T: T, H: H}, []G.Value{x}},
		{"MergeHeads", headsOp{B: B, T: T, H: H, merge: true}, []G.Value{dense(B*H, T, C/H)}},
		{"CausalSoftmax", causalSoftmaxOp{scale: scale}, []G.Value{att}},
		{"CausalSoftmaxGrad", causalSoftmaxOp{scale: scale, grad: true}, []G.Value{p, datt}},
		{"CrossEntropy", xentOp{}, []G.Value{logits, targets}},
		{"CrossEntropyGrad", xentOp{grad: true}, []G.Value{logits, targets, G.NewF32(1)}},
	}
}

// BenchmarkOps runs every custom op at baby's shapes through gorgonia's
// UsePreallocDo and through its arena kernel, split and serial.
func BenchmarkOps(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, tc := range babyOps() {
		want, err := tc.op.Do(tc.in...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/prealloc", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.op.UsePreallocDo(want, tc.in...); err != nil {
					b.Fatal(err)
				}
			}
		})
		k, ok := any(tc.op).(arena.Kernel)
		if !ok {
			continue
		}
		out, in := bufsOf(b, want, tc.in)
		// the kernel as bound by default (split across the pool above a
		// size), and bound serially: their ratio is what the split buys.
		for _, limit := range []int{par.MaxParts, 1} {
			prev := par.SetLimit(limit)
			run, ok := k.BindKernel(out, in)
			par.SetLimit(prev)
			if !ok {
				b.Fatalf("%s: BindKernel refused baby shapes", tc.name)
			}
			name := tc.name + "/kernel"
			if limit == 1 {
				name += "-serial"
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					run()
				}
			})
		}
	}
}

// BenchmarkCausalProbs times the fused scores-and-softmax of baby's shape
// (B·H = 48, T = 64, hs = 32) and of the checkpoint lab's long shape
// (T = 256) against the two ops it replaces, run back to back on gptlab's
// sgemm.
func BenchmarkCausalProbs(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	prev := tensor.WhichBLAS()
	sgemm.Use()
	defer G.Use(prev)
	for _, T := range []int{64, 256} {
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) { benchCausalProbs(b, T) })
	}
}

func benchCausalProbs(b *testing.B, T int) {
	const N, d, scale = 48, 32, 0.17677669529663687
	qs, ts := tensor.Shape{N, T, d}, tensor.Shape{N, T, T}
	buf := func(s tensor.Shape, data []float32) arena.Buf {
		if data == nil {
			data = make([]float32, s.TotalSize())
		}
		return arena.Buf{Dtype: arena.F32, F32: data, Shape: s}
	}
	in := []arena.Buf{buf(qs, benchData(N*T*d)), buf(qs, benchData(N*T*d))}
	s, p := buf(ts, nil), buf(ts, nil)
	bind := func(op binder, out arena.Buf, in []arena.Buf) func() {
		run, err := op.bind(out, in)
		if err != nil {
			b.Fatal(err)
		}
		return run
	}
	scores, softmax := bind(causalOp{kind: causalScores}, s, in), bind(causalSoftmaxOp{scale: scale}, p, []arena.Buf{s})
	fused := bind(causalOp{kind: causalProbs, scale: scale}, p, in)
	b.Run("scores+softmax", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scores()
			softmax()
		}
	})
	b.Run("fused", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fused()
		}
	})
}

// BenchmarkAttentionHeads times one baby attention's causal ops, forward
// and backward (the probabilities and their product with v; the four
// products of the backward and the softmax's gradient), with q, k, v and
// the output as heads in place against split into items, the SplitHeads
// and MergeHeads that layout needs included (three and one forward, one
// and three backward), on gptlab's sgemm.
func BenchmarkAttentionHeads(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	prev := tensor.WhichBLAS()
	sgemm.Use()
	defer G.Use(prev)
	const B, T, H, d, scale = 12, 64, 4, 32, 0.17677669529663687
	rows, items, tt := tensor.Shape{B * T, H * d}, tensor.Shape{B * H, T, d}, tensor.Shape{B * H, T, T}
	buf := func(s tensor.Shape) arena.Buf {
		return arena.Buf{Dtype: arena.F32, F32: benchData(s.TotalSize()), Shape: s}
	}
	bind := func(op binder, out arena.Buf, in ...arena.Buf) func() {
		run, err := op.bind(out, in)
		if err != nil {
			b.Fatal(err)
		}
		return run
	}
	for _, inPlace := range []bool{true, false} {
		l, x := heads{H: H, T: T}, rows
		if !inPlace {
			l, x = heads{}, items
		}
		q, k, v, dy := buf(x), buf(x), buf(x), buf(x)
		y, dq, dk, dv := buf(x), buf(x), buf(x), buf(x)
		p, dp, ds := buf(tt), buf(tt), buf(tt)
		runs := []func(){
			bind(causalOp{kind: causalProbs, scale: scale, heads: l}, p, q, k),
			bind(causalOp{kind: causalApply, heads: l}, y, p, v),
			bind(causalOp{kind: causalScores, heads: l}, dp, dy, v),
			bind(causalOp{kind: causalApplyT, heads: l}, dv, p, dy),
			bind(causalSoftmaxOp{scale: scale, grad: true}, ds, p, dp),
			bind(causalOp{kind: causalApply, heads: l}, dq, ds, k),
			bind(causalOp{kind: causalApplyT, heads: l}, dk, ds, q),
		}
		name := "in-place"
		if !inPlace {
			name = "split"
			split, merge := headsOp{B: B, T: T, H: H}, headsOp{B: B, T: T, H: H, merge: true}
			r := buf(rows)
			for _, s := range []arena.Buf{q, k, v, dy} { // the forward's three, the backward's dy
				runs = append(runs, bind(split, s, r))
			}
			for _, m := range []arena.Buf{y, dq, dk, dv} { // the forward's y, the backward's three
				runs = append(runs, bind(merge, buf(rows), m))
			}
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, run := range runs {
					run()
				}
			}
		})
	}
}
