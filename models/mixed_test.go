package models

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"

	"gptlab/internal/bf16gemm"
	"gptlab/internal/par"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// policy is the named policy, or the test fails.
func policy(t testing.TB, name string) precision.Policy {
	t.Helper()
	p, err := precision.ParsePolicy(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mixedBatch is a fixed random tiny batch.
func mixedBatch(cfg Config) (idx, tgt []int32) {
	r := rand.New(rand.NewPCG(5, 6))
	N := cfg.Batch * cfg.Block
	idx, tgt = make([]int32, N), make([]int32, N)
	for i := range idx {
		idx[i], tgt[i] = int32(r.IntN(cfg.Vocab)), int32(r.IntN(cfg.Vocab))
	}
	return idx, tgt
}

// stepOf builds a tiny training model with opts, runs one step and returns
// the loss and every gradient (laid out like Params.Data).
func stepOf(t *testing.T, p *Params, scale float32, opts ...ModelOption) (float32, []float32) {
	t.Helper()
	cfg := p.Config()
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.SetLossScale(scale); err != nil {
		t.Fatal(err)
	}
	loss, err := m.Step(mixedBatch(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var g []float32
	for _, name := range p.Names() {
		g = append(g, m.Grad(name)...)
	}
	return loss, g
}

func tinyParams(t *testing.T) *Params {
	t.Helper()
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return NewParams(cfg, 7)
}

// worstRelDiff is the largest normwise relative difference ‖a−b‖/‖b‖ over
// the parameter tensors of p.
func worstRelDiff(p *Params, a, b []float32) (float64, string) {
	worst, at, off := 0.0, "", 0
	for _, name := range p.Names() {
		n := len(p.Slice(name))
		var d, r float64
		for i := off; i < off+n; i++ {
			d += (float64(a[i]) - float64(b[i])) * (float64(a[i]) - float64(b[i]))
			r += float64(b[i]) * float64(b[i])
		}
		if e := math.Sqrt(d / r); e > worst || math.IsNaN(e) {
			worst, at = e, name
		}
		off += n
	}
	return worst, at
}

// TestPrecisionF32IsThePlainStep: the f32 policy builds the float32 graph
// itself: loss and gradients bitwise those of a model built without the
// option.
func TestPrecisionF32IsThePlainStep(t *testing.T) {
	p := tinyParams(t)
	l0, g0 := stepOf(t, p, 1)
	l1, g1 := stepOf(t, p, 1, WithPrecision(policy(t, "f32")))
	if math.Float32bits(l0) != math.Float32bits(l1) || !slices.Equal(g0, g1) {
		t.Errorf("f32 policy: loss %v, want %v bitwise; gradients equal: %v", l1, l0, slices.Equal(g0, g1))
	}
}

// TestMixedStepNearF32: under bf16 and fp16 the step's loss and gradients
// are the float32 step's within the formats' documented tolerances (bf16
// keeps 8 significant bits, fp16 11: each op boundary rounds by at most
// 2^-9 and 2^-12 relative; through the 2-layer model the gradients move by
// a few such units), and not bitwise (the negative control: the casts
// round something). fp16 runs with a loss scale of 2^10, its gradients
// unscaled before the comparison.
func TestMixedStepNearF32(t *testing.T) {
	p := tinyParams(t)
	l32, g32 := stepOf(t, p, 1)
	for _, tc := range []struct {
		name      string
		scale     float32
		lossTol   float64 // relative
		gradTol   float64 // normwise relative, per parameter
		gradFloor float64 // at least this far from f32 somewhere
	}{
		{"bf16", 1, 4e-3, 5e-2, 1e-4},
		{"fp16", 1024, 5e-4, 1e-2, 1e-5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, g := stepOf(t, p, tc.scale, WithPrecision(policy(t, tc.name)))
			for i := range g {
				g[i] /= tc.scale
			}
			if d := math.Abs(float64(l-l32)) / float64(l32); !(d <= tc.lossTol) || l == l32 {
				t.Errorf("loss %v, f32 %v: relative difference %.2g, want in (0, %g]", l, l32, d, tc.lossTol)
			}
			worst, at := worstRelDiff(p, g, g32)
			if !(worst <= tc.gradTol) || worst < tc.gradFloor {
				t.Errorf("gradients: worst normwise relative difference %.3g (%s), want in [%g, %g]", worst, at, tc.gradFloor, tc.gradTol)
			}
			t.Logf("loss %v (f32 %v), worst gradient difference %.3g (%s)", l, l32, worst, at)
		})
	}
}

// TestMixedTapeAgreesWithArena: the bf16 graph run by the TapeMachine (which
// allocates every value) and by the planned arena gives bitwise the same
// loss and gradients, and a guarded run of the arena finds no value
// overwritten while live.
func TestMixedTapeAgreesWithArena(t *testing.T) {
	p := tinyParams(t)
	bf := WithPrecision(policy(t, "bf16"))
	la, ga := stepOf(t, p, 1, bf)
	lt, gt := stepOf(t, p, 1, bf, WithTapeMachine())
	if math.Float32bits(la) != math.Float32bits(lt) || !slices.Equal(ga, gt) {
		t.Errorf("arena loss %v, tape %v; gradients equal: %v", la, lt, slices.Equal(ga, gt))
	}
	cfg := p.Config()
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, bf)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Feed(mixedBatch(cfg)); err != nil {
		t.Fatal(err)
	}
	if err := m.Arena().RunGuarded(); err != nil {
		t.Fatal(err)
	}
}

// TestLossScaleSeedsTheBackward: in float32 a loss scale of 2^10 scales
// every gradient by exactly 2^10 (a power of two commutes with rounding,
// short of overflow and subnormals) and leaves the loss alone.
func TestLossScaleSeedsTheBackward(t *testing.T) {
	p := tinyParams(t)
	l1, g1 := stepOf(t, p, 1)
	ls, gs := stepOf(t, p, 1024)
	if l1 != ls {
		t.Errorf("loss with scale 1024: %v, want the unscaled %v", ls, l1)
	}
	for i, v := range g1 {
		if gs[i] != 1024*v {
			t.Fatalf("gradient %d: %v with scale 1024, want %v", i, gs[i], 1024*v)
		}
	}
}

// TestSavedActivations16Bit: under bf16 and fp16 every value the forward
// keeps for the backward is a 16-bit buffer but for the cast up the first
// backward op reads (the logits', an f32 (B*T, V)), so they take at most
// 0.55x their f32 bytes, planned and as the run holds them; the weights'
// 16-bit copies are counted apart, at 2 bytes a weight the products read.
func TestSavedActivations16Bit(t *testing.T) {
	p := tinyParams(t)
	cfg := p.Config()
	mem := func(name string) StepMemory {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(policy(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if _, err := m.Step(mixedBatch(cfg)); err != nil {
			t.Fatal(err)
		}
		s, err := m.Memory()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f := mem("f32")
	if f.Saved16 != 0 || f.WeightCopies != 0 || f.Saved != f.SavedRun || f.Saved == 0 {
		t.Errorf("f32 step memory %+v: want no 16-bit values, saved = run > 0", f)
	}
	logits := int64(4 * cfg.Batch * cfg.Block * cfg.Vocab)
	var weights int64 // the linear layers' and the head's
	for _, name := range p.Names() {
		if s := p.Shape(name); len(s) == 2 && name != "transformer.wpe.weight" {
			weights += int64(2 * len(p.Slice(name)))
		}
	}
	for _, name := range []string{"bf16", "fp16"} {
		s := mem(name)
		if s.SavedRun != s.Saved || s.Saved16 != s.Saved-logits {
			t.Errorf("%s: saved %d planned, %d run, %d of it 16-bit; want all but the logits' %d bytes 16-bit", name, s.Saved, s.SavedRun, s.Saved16, logits)
		}
		if r := float64(s.Saved) / float64(f.Saved); r > 0.55 {
			t.Errorf("%s: saved activations %d bytes, %.3fx f32's %d: want at most 0.55x", name, s.Saved, r, f.Saved)
		}
		if s.WeightCopies != weights {
			t.Errorf("%s: weight copies %d bytes, want %d (2 per linear and head weight)", name, s.WeightCopies, weights)
		}
		if s.Master != f.Master || s.Master != int64(4*p.Count()) {
			t.Errorf("%s: master %d bytes, want %d", name, s.Master, 4*p.Count())
		}
	}
}

// TestUnderflowCounted: at the backward's gradient casts fp16 without
// scaling flushes some nonzero values to zero, a loss scale of 2^16 keeps
// nearly all of them, and bf16 (float32's exponent range) flushes fewer
// still; a float32 model has no casts to watch.
func TestUnderflowCounted(t *testing.T) {
	p := tinyParams(t)
	cfg := p.Config()
	count := func(name string, scale float32) Underflow {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(policy(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		u := Underflow{Active: true}
		if err := m.WatchUnderflow(&u); err != nil {
			t.Fatal(err)
		}
		if err := m.SetLossScale(scale); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(mixedBatch(cfg)); err != nil {
			t.Fatal(err)
		}
		return u
	}
	raw, scaled, bf := count("fp16-noscale", 1), count("fp16", 1<<16), count("bf16", 1)
	if raw.Flushed == 0 || raw.Nonzero == 0 || raw.Values < raw.Nonzero {
		t.Errorf("fp16 without scaling: %+v, want some nonzero gradient values flushed", raw)
	}
	if !(scaled.Share() < raw.Share()/10) || bf.Share() > scaled.Share() {
		t.Errorf("flushed shares: fp16 %.3g unscaled, %.3g at 2^16, bf16 %.3g: want scaling to keep 10x more, bf16 no worse", raw.Share(), scaled.Share(), bf.Share())
	}
	t.Logf("flushed: fp16-noscale %+v, fp16 %+v, bf16 %+v", raw, scaled, bf)
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WatchUnderflow(new(Underflow)); !errors.Is(err, ErrConfig) {
		t.Errorf("WatchUnderflow on an f32 model: %v, want ErrConfig", err)
	}
}

// TestUnderflowCountedOnTwoStreams: a halved step counts the same
// underflow on its two streams as on one (the casts of both streams add
// to one count), step after step; counted without a lock, the streams'
// sums lost some of each other's.
func TestUnderflowCountedOnTwoStreams(t *testing.T) {
	if par.Workers() == 0 {
		t.Skip("one CPU: no second stream")
	}
	p := tinyParams(t)
	cfg := p.Config()
	count := func(two bool) Underflow {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithPrecision(policy(t, "fp16-noscale")), WithStreams(HalfBatches))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if !two {
			if err := m.Arena().SetStreams(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
		}
		u := Underflow{Active: true}
		if err := m.WatchUnderflow(&u); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			if _, err := m.Step(mixedBatch(cfg)); err != nil {
				t.Fatal(err)
			}
		}
		return u
	}
	one, two := count(false), count(true)
	if one != two || one.Flushed == 0 {
		t.Errorf("underflow on one stream %+v, on two %+v: want equal, some flushed", one, two)
	}
}

// TestUnderflowCountsRoundTrips: the gradient casts the arena runs as
// their op's output rounded in place (round trips) are counted as the
// casts would count them: a bf16 step under a loss scale of 2^-115, which
// drives some gradients below bf16's subnormals, counts the same values,
// nonzero values and flushes as the program running every cast, on the
// cast path and on the speed path's graph.
func TestUnderflowCountsRoundTrips(t *testing.T) {
	p := tinyParams(t)
	cfg := p.Config()
	restoreGemm16(t)
	count := func(opts ...ModelOption) (Underflow, bool) {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, append([]ModelOption{WithPrecision(policy(t, "bf16"))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		trips := false
		for _, n := range m.Graph().AllNodes() {
			trips = trips || m.Arena().RoundsInPlace(n)
		}
		u := Underflow{Active: true}
		if err := m.WatchUnderflow(&u); err != nil {
			t.Fatal(err)
		}
		if err := m.SetLossScale(0x1p-115); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Step(mixedBatch(cfg)); err != nil {
			t.Fatal(err)
		}
		return u, trips
	}
	for _, gemm16 := range []int{-1, 1} {
		gemm16Override = gemm16
		fused, trips := count()
		every, _ := count(WithArena(arena.Options{InPlace: true, KeepCasts: true}))
		if !trips || fused != every || fused.Flushed == 0 || fused.Flushed == fused.Nonzero {
			t.Errorf("gemm16 %d: round trips %v; counted %+v, running every cast %+v: want equal, some flushed and not all", gemm16, trips, fused, every)
		}
	}
}

// restoreGemm16 puts gemm16Override and bf16gemm's path back as they
// were when t ends (tests that force the speed path's graph or a path).
func restoreGemm16(t *testing.T) {
	o := gemm16Override
	t.Cleanup(func() {
		gemm16Override = o
		if err := bf16gemm.SetPath("auto"); err != nil {
			t.Error(err)
		}
	})
}

// TestGemm16OnWidenIsTheCastStep: the speed path's graph (the linear
// layers on internal/bf16gemm) computes on bf16gemm's widen path bitwise
// what the cast path computes with internal/sgemm, and on every other
// path this machine has within float32 summation-order error.
func TestGemm16OnWidenIsTheCastStep(t *testing.T) {
	p := tinyParams(t)
	bf := WithPrecision(policy(t, "bf16"))
	restoreGemm16(t)
	gemm16Override = -1
	lc, gc := stepOf(t, p, 1, bf)
	gemm16Override = 1
	for _, path := range append(bf16gemm.Paths(), "auto") {
		t.Run(path, func(t *testing.T) {
			if err := bf16gemm.SetPath(path); err != nil {
				t.Fatal(err)
			}
			cfg := p.Config()
			m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, bf)
			if err != nil {
				t.Fatal(err)
			}
			gemms := 0
			for _, n := range m.Graph().AllNodes() {
				if op := n.Op(); op != nil && strings.HasPrefix(op.String(), "Gemm16{") { // ops.Gemm16, forward or gradient
					gemms++
				}
			}
			if want := 3 * (6*cfg.Layers + 1); gemms != want {
				t.Errorf("%d Gemm16 ops, want %d (forward and two gradients of %d linear layers and the head)", gemms, want, 6*cfg.Layers)
			}
			l, g := stepOf(t, p, 1, bf)
			if path == "widen" {
				if math.Float32bits(l) != math.Float32bits(lc) || !slices.Equal(g, gc) {
					t.Errorf("widen: loss %v, cast path %v; gradients equal: %v", l, lc, slices.Equal(g, gc))
				}
				return
			}
			if worst, at := worstRelDiff(p, g, gc); !(worst <= 1e-4) {
				t.Errorf("%s: gradients %.3g from the cast path's (%s), want <= 1e-4", path, worst, at)
			}
		})
	}
}

// TestFusedCastsBitwise: on the speed path's graph the arena fuses the
// casts up whose every reader reads bf16 (arena.BF16Reader: the products,
// the attention's ops, GELU, the column sums) and the round trips (an
// output cast down and straight back up: its op rounds it in place,
// before its readers would widen the bits, unless a bf16 product reads
// them), and the step is bitwise the one that runs every cast
// (arena.Options.KeepCasts), on every bf16gemm path; the fused program
// runs fewer ops, only casts fewer, and the casts that some other op
// reads still run.
func TestFusedCastsBitwise(t *testing.T) {
	p := tinyParams(t)
	bf := WithPrecision(policy(t, "bf16"))
	restoreGemm16(t)
	gemm16Override = 1
	casts := func(opts ...ModelOption) (steps, up, down int) {
		cfg := p.Config()
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, append([]ModelOption{bf}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		prog := m.Arena()
		g := m.Graph()
		readers := func(n *G.Node) (rs []*G.Node, bf16, native bool) {
			bf16 = true
			for it := g.To(n.ID()); it.Next(); {
				r := it.Node().(*G.Node)
				rs = append(rs, r)
				b, ok := r.Op().(arena.BF16Reader)
				bf16 = bf16 && ok && b.ReadsBF16(0)
				if nb, ok := r.Op().(arena.BF16Native); ok && nb.BF16Native(0) {
					native = true
				}
			}
			return rs, bf16, native
		}
		for _, n := range g.AllNodes() {
			c, ok := n.Op().(arena.CastOp)
			if _, runs := prog.RunsOp(n); !ok || !runs {
				continue
			}
			switch {
			case c.From == arena.BF16 && c.To == arena.F32:
				up++
				if rs, bf16, _ := readers(n); bf16 && len(opts) == 0 {
					t.Errorf("a cast up read by %v only, which read bf16, runs", rs)
				}
			case c.From == arena.F32 && c.To == arena.BF16:
				down++
				// A cast down whose readers are all casts up read by ops
				// widening bf16 is a round trip: rounded in place, unless
				// a bf16 product reads it.
				ups, _, _ := readers(n)
				trip, native := len(opts) == 0, false
				for _, u := range ups {
					cu, ok := u.Op().(arena.CastOp)
					_, bf16, nat := readers(u)
					trip = trip && ok && cu.To == arena.F32 && bf16
					native = native || nat
				}
				src := g.From(n.ID())
				src.Next()
				if s, _, _ := readers(src.Node().(*G.Node)); trip && !native && len(s) == 1 && src.Node().(*G.Node).Op() != nil {
					t.Errorf("the cast down of %v runs, its casts up read only by ops widening bf16", src.Node())
				}
			}
		}
		return prog.Steps(), up, down
	}
	keep := WithArena(arena.Options{InPlace: true, KeepCasts: true})
	for _, path := range append(bf16gemm.Paths(), "auto") {
		t.Run(path, func(t *testing.T) {
			if err := bf16gemm.SetPath(path); err != nil {
				t.Fatal(err)
			}
			lk, gk := stepOf(t, p, 1, bf, keep)
			lf, gf := stepOf(t, p, 1, bf)
			if math.Float32bits(lf) != math.Float32bits(lk) || !slices.Equal(gf, gk) {
				t.Errorf("fused casts: loss %v, every cast run %v; gradients equal: %v", lf, lk, slices.Equal(gf, gk))
			}
		})
	}
	sk, uk, dk := casts(keep)
	sf, uf, df := casts()
	if !(uf < uk && df < dk && sk-sf == uk-uf+dk-df) || uf == 0 || df == 0 {
		t.Errorf("ops run: %d fused, %d with every cast; casts up %d and %d, down %d and %d; want fewer of each (and only casts), some kept",
			sf, sk, uf, uk, df, dk)
	}
	t.Logf("casts run, fused against every cast: up %d and %d, down %d and %d; ops %d and %d", uf, uk, df, dk, sf, sk)
}

// TestPrecisionRefused: policies the graph cannot build and a step
// schedule under a 16-bit policy are configuration errors.
func TestPrecisionRefused(t *testing.T) {
	p := tinyParams(t)
	cfg := p.Config()
	bf := policy(t, "bf16")
	odd := bf
	odd.Gradients = precision.F32
	half := bf
	half.Accumulate = precision.BF16
	for _, tc := range []struct {
		name string
		opts []ModelOption
	}{
		{"gradients apart", []ModelOption{WithPrecision(odd)}},
		{"bf16 accumulation", []ModelOption{WithPrecision(half)}},
	} {
		if _, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, tc.opts...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewModel error %v, want ErrConfig", tc.name, err)
		}
	}
}

// TestMixedStepAllocatesNothing: the casts run as kernels bound to the
// arena, so a bf16 step (on the cast path and on the speed path's graph)
// allocates no more than the float32 step does.
func TestMixedStepAllocatesNothing(t *testing.T) {
	p := tinyParams(t)
	cfg := p.Config()
	idx, tgt := mixedBatch(cfg)
	allocs := func(opts ...ModelOption) float64 {
		m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return testing.AllocsPerRun(5, func() {
			if _, err := m.Step(idx, tgt); err != nil {
				t.Fatal(err)
			}
		})
	}
	plain := allocs()
	t.Logf("f32 step: %v allocations", plain)
	bf := WithPrecision(policy(t, "bf16"))
	if n := allocs(bf); n > plain {
		t.Errorf("bf16 step: %v allocations, f32 step %v", n, plain)
	}
	defer func(o int) { gemm16Override = o }(gemm16Override)
	gemm16Override = 1
	if n := allocs(bf); n > plain {
		t.Errorf("bf16 step on the speed path's graph: %v allocations, f32 step %v", n, plain)
	}
}
