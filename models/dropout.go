package models

// dropout.go: dropout as the graph holds it, a product with a mask input
// per site (the masks come from rng.go's generators or ops.DropoutMask,
// filled by the caller before each run), and the list of masks a graph
// feeds (maskList).

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/internal/par"
	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// maskInput is one dropout mask fed to the graph.
type maskInput struct {
	node        *G.Node
	data        []float32
	layer, site int
}

// dropout multiplies x by a mask input for (layer, site) when training
// with a positive dropout; otherwise it returns x itself (no node at all).
func (n *builder) dropout(x *G.Node, layer, site int) *G.Node {
	y, _ := n.dropoutMask(x, layer, site)
	return y
}

// dropoutMask is dropout, and the mask input it multiplies by (nil when
// there is none).
func (n *builder) dropoutMask(x *G.Node, layer, site int) (y, mask *G.Node) {
	if !n.train || n.cfg.Dropout == 0 || n.err != nil {
		return x, nil
	}
	s := x.Shape()
	data := make([]float32, s.TotalSize())
	// a name of its own (gorgonia makes inputs of one name one node): a
	// recomputation's masks are inputs of their own, filled like the first
	// pass's (stateless) or drawn again (stateful)
	mask = n.input(fmt.Sprintf("dropout.%d.%d.%d", layer, site, n.masks), data, s...)
	n.masks++
	for _, h := range n.hooks {
		h.mask(maskInput{node: mask, data: data, layer: layer, site: site})
	}
	return n.do(func() (*G.Node, error) { return arena.Masked(x, mask) }), mask
}

// maskList is the hook that lists every dropout mask input of a graph,
// in the order they were made: what its caller fills before each run.
type maskList struct {
	noHook
	all []maskInput
}

func (l *maskList) mask(mk maskInput) { l.all = append(l.all, mk) }

// maskBlock is elements lo..hi of mask mk of a maskFill; src ≥ 0 is an
// earlier mask of the same (layer, site) that the block is copied from.
type maskBlock struct{ mk, src, lo, hi int }

// maskBlockLen is the elements of one block of a maskFill: small enough
// that the largest mask splits across the pool, large enough that a block
// costs far more than claiming it.
const maskBlockLen = 1 << 14

// maskFill fills a graph's stateless dropout masks for one run across the
// par pool: each mask is cut into blocks, each block filled by
// ops.DropoutMaskAt from its own offset, so the masks are exactly
// ops.DropoutMask's whoever fills which block. A recomputation's mask
// (the same layer and site as a mask before it, so the same mask) is
// copied from that one once it is filled, not drawn again. Bound once; a
// run allocates nothing.
type maskFill struct {
	masks       []maskInput
	draw, copy  []maskBlock
	drawn, dups *par.Split
	// the run's mask arguments, set by fill before the splits run
	p          float64
	seed, step int64
}

func newMaskFill(masks []maskInput) *maskFill {
	f := &maskFill{masks: masks}
	first := map[[2]int]int{} // (layer, site) -> its first mask
	for i, mk := range masks {
		src, seen := first[[2]int{mk.layer, mk.site}]
		if !seen || len(masks[src].data) != len(mk.data) {
			first[[2]int{mk.layer, mk.site}], src = i, -1
		}
		for lo := 0; lo < len(mk.data); lo += maskBlockLen {
			b := maskBlock{mk: i, src: src, lo: lo, hi: min(lo+maskBlockLen, len(mk.data))}
			if src < 0 {
				f.draw = append(f.draw, b)
			} else {
				f.copy = append(f.copy, b)
			}
		}
	}
	f.drawn = par.New(len(f.draw), maskBlockLen, func(lo, hi int) {
		for _, b := range f.draw[lo:hi] {
			mk := f.masks[b.mk]
			ops.DropoutMaskAt(mk.data[b.lo:b.hi], f.p, f.seed, f.step, mk.layer, mk.site, b.lo)
		}
	})
	f.dups = par.New(len(f.copy), maskBlockLen/8, func(lo, hi int) {
		for _, b := range f.copy[lo:hi] {
			copy(f.masks[b.mk].data[b.lo:b.hi], f.masks[b.src].data[b.lo:b.hi])
		}
	})
	return f
}

// fill fills every mask for (p, seed, step).
func (f *maskFill) fill(p float64, seed, step int64) {
	f.p, f.seed, f.step = p, seed, step
	f.drawn.Run()
	f.dups.Run()
}
