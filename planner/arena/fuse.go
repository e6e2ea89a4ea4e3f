package arena

import "gorgonia.org/gorgonia"

// fuse.go: the casts up of a 16-bit policy folded into their readers. The
// bf16 policy's graph stores every value as bf16: an op writes f32, a
// cast rounds it down, and a cast up widens it again for its readers. A
// cast up whose readers can all read the bf16 bits themselves never runs:
// its value is the bf16 value, and no f32 copy is planned for it. The
// results are bitwise those of the program that runs every cast
// (Options.KeepCasts): a reader widens bf16 exactly.
//
// A round trip, an op's float32 output cast down and straight back up
// (the bf16 policy's product outputs, residual sums, biased outputs and
// scores, whose only reader is the cast down), runs no cast up: the op
// rounds its own output in place to bf16 values (precision.RoundBF16, the
// two casts' code, while the output is still in cache) and the cast up's
// readers read it; no bf16 copy is planned. Bitwise the same again. On
// the baby step, 62 of the 163 casts down and as many casts up: the step
// 0.958-0.965x of running them (three in-process runs of 480 interleaved
// steps). Where the cast down has another reader too (the backward's
// saved copy), the op could round in place all the same, the cast down
// then rounding the rounded values to the same bits, and only the cast up
// go: that took 26 more casts up away and measured 0.990-1.003x, so it
// is not done.
//
// A value that could go either way, rounded in place or cast down for
// readers of the bits, is rounded in place, unless a reader computes on
// the bits themselves (BF16Native: a bf16 product, which would narrow a
// float32 operand again): a reader that widens the bits (the attention's
// ops, GELUGrad) reads the rounded float32 as cheaply, and the cast down
// is spared. With the attention's ops reading bf16 (its casts up of q, k,
// v and the probabilities fused), the baby step runs 89 casts down and
// 20 up, against 93 and 52; the step 1.034x and 1.040x faster on two
// streams, 1.006x on one (a 2-vCPU Zen 5, in-process, interleaved). The
// attention's ops reading bf16 with the fused reads first (the round
// trips they then break cast down) measured 0.981x.
//
// A cast down of a cast up from the same type, the gradient a residual
// add passes on unchanged, is never built (CastOp.SymDiff hands on the
// 16-bit value): eight casts down of the baby step, no measurable time.
//
// The other casts down are left as they are: letting the op before one write
// bf16 itself (AddBias and GELU rounding their rows in scratch) measured
// no faster on the baby step (fused over unfused 0.998-1.010x, 280
// interleaved steps), since it costs AddBias its in-place write. So are
// the casts up that LayerNorm, its gradients, the residual adds and the
// casts down read: widening rows of 128 into scratch in each of them
// measured no faster than one cast over the whole value (the step with
// them fused over every cast 0.931-0.983x, without them 0.933-0.958x,
// three in-process runs each on a loaded machine).

// BF16Reader is implemented by an op that can read its input i as the
// bf16 value a Cast{bf16→f32} casts up, in place of the cast's float32
// output, with the same result: a matrix product on bf16 kernels reads
// the bits it would convert the float32 copy back to. A cast up that is
// not retained and whose every reader reads it so is fused: the program
// runs no cast and plans no float32 copy, and its readers are bound to
// the bf16 value (their kernels see a BF16 Buf there).
type BF16Reader interface {
	ReadsBF16(i int) bool
}

// BF16Native is implemented by a BF16Reader that computes on the bf16
// bits themselves (a bf16 product packs them as they are): handed the
// float32 copy, it would narrow it again. A cast up read by one is fused
// into its readers even where its value could be rounded in place.
type BF16Native interface {
	BF16Native(i int) bool
}

// valueOf is n's value: its own, or the value a fused cast stands for.
func (p *Program) valueOf(n *gorgonia.Node) (Value, bool) {
	if v, ok := p.byNode[n.ID()]; ok {
		return v, true
	}
	v, ok := p.fused[n.ID()]
	return v, ok
}

// fusion is what fuseCasts takes out of the program.
type fusion struct {
	reads map[*gorgonia.Node]bool // casts up whose readers read the bf16 value
	// ups maps the cast up of a round trip to the op whose output it
	// stands for, rounded in place; drops holds the casts down that then
	// have no reader left.
	ups   map[*gorgonia.Node]*gorgonia.Node
	drops map[*gorgonia.Node]bool
}

// fuseCasts returns the casts of order that no step need run: the casts
// up not retained, read by some op of order, and by each only at inputs
// it can read as the bf16 value itself (BF16Reader, not a view); and the
// round trips: a cast down not retained, read only by casts up not fused
// so, of an op's tensor output that nothing else reads and nobody
// retains. The op rounds its output in place and the casts up stand for
// it (they may be retained).
func (p *Program) fuseCasts(order, retain []*gorgonia.Node) fusion {
	g := p.g
	kept := map[*gorgonia.Node]bool{}
	for _, n := range retain {
		kept[n] = true
	}
	type use struct {
		reader *gorgonia.Node
		arg    int
	}
	uses := map[*gorgonia.Node][]use{}
	for _, n := range order {
		i := 0
		for it := g.From(n.ID()); it.Next(); i++ {
			c := it.Node().(*gorgonia.Node)
			uses[c] = append(uses[c], use{n, i})
		}
	}
	isView := func(n *gorgonia.Node) bool { v, ok := n.Op().(Viewer); return ok && v.IsView() }
	isCast := func(n *gorgonia.Node, from, to Dtype) bool {
		c, ok := n.Op().(CastOp)
		return ok && c.From == from && c.To == to && g.From(n.ID()).Len() == 1
	}
	// readsBF16 reports whether every reader of the cast up n can read
	// the bf16 value (not retained, read, and by each only at inputs it
	// can read as bf16, not as a view), and whether one computes on the
	// bits themselves (BF16Native).
	readsBF16 := func(n *gorgonia.Node) (all, native bool) {
		all = !kept[n] && len(uses[n]) > 0
		for _, u := range uses[n] {
			r, ok := u.reader.Op().(BF16Reader)
			all = all && ok && !isView(u.reader) && r.ReadsBF16(u.arg)
			if r, ok := u.reader.Op().(BF16Native); ok && r.BF16Native(u.arg) {
				native = true
			}
		}
		return all, all && native
	}
	// The round trips first: an op that rounds its own output in place
	// spares the cast down, where readers widening the bf16 bits still
	// need it; so a cast up of a round trip is not fused into its
	// readers, unless one of them computes on the bits (a bf16 product,
	// which would narrow the float32 copy again).
	f := fusion{ups: map[*gorgonia.Node]*gorgonia.Node{}, drops: map[*gorgonia.Node]bool{}}
	for _, down := range order {
		if !isCast(down, F32, BF16) {
			continue
		}
		it := g.From(down.ID())
		it.Next()
		src := it.Node().(*gorgonia.Node)
		if src.Op() == nil || g.From(src.ID()).Len() == 0 || src.IsScalar() || isView(src) || kept[src] || len(uses[src]) != 1 {
			continue
		}
		ups := uses[down]
		all := len(ups) > 0 && !kept[down]
		for _, u := range ups {
			_, native := readsBF16(u.reader)
			all = all && isCast(u.reader, BF16, F32) && !native
		}
		if !all {
			continue
		}
		f.drops[down] = true
		for _, u := range ups {
			f.ups[u.reader] = src
		}
	}
	f.reads = map[*gorgonia.Node]bool{}
	for _, n := range order {
		if _, trip := f.ups[n]; isCast(n, BF16, F32) && !trip {
			f.reads[n], _ = readsBF16(n)
		}
	}
	return f
}
