package models

// dropout.go: dropout as the graph holds it. A stateless mask (a hash of
// the counters) is drawn in the kernel that applies it (ops.Dropout, and
// the fused attention core): the graph holds no mask, and the ops read
// the seed and step from the builder's key when they run. A stateful
// mask (rng.go) is a mask input per site, multiplied in (arena.Masked)
// and filled by the caller before each run; maskList lists those.

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// maskInput is one dropout mask fed to the graph.
type maskInput struct {
	node        *G.Node
	data        []float32
	layer, site int
}

// dropMask is how one dropout site's mask reaches the graph: drawn in the
// kernels (site, non-nil for a stateless mask) or read from a mask input
// (mask). The zero value is no dropout.
type dropMask struct {
	site *ops.DropoutSite
	mask *G.Node
}

// apply is x with d's dropout: ops.Dropout, x ⊙ mask, or x itself.
func (d dropMask) apply(n *builder, x *G.Node) *G.Node {
	switch {
	case d.site != nil:
		return n.do(func() (*G.Node, error) { return ops.Dropout(x, *d.site) })
	case d.mask != nil:
		return n.do(func() (*G.Node, error) { return arena.Masked(x, d.mask) })
	}
	return x
}

// dropout multiplies x by the mask for (layer, site) when training with a
// positive dropout; otherwise it returns x itself (no node at all).
func (n *builder) dropout(x *G.Node, layer, site int) *G.Node {
	y, _ := n.dropoutMask(x, layer, site)
	return y
}

// dropoutMask is dropout, and how its mask reaches the graph.
func (n *builder) dropoutMask(x *G.Node, layer, site int) (*G.Node, dropMask) {
	if !n.train || n.cfg.Dropout == 0 || n.err != nil {
		return x, dropMask{}
	}
	if n.drop != nil {
		// x holds sequences seq0… of the batch: its mask is theirs in the
		// whole batch's (every site's tensor is sequence-major)
		first := n.seq0 * x.Shape().TotalSize() / n.B
		d := dropMask{site: &ops.DropoutSite{Key: n.drop, P: n.cfg.Dropout, Layer: layer, Site: site, First: first}}
		return d.apply(n, x), d
	}
	s := x.Shape()
	data := make([]float32, s.TotalSize())
	// a name of its own (gorgonia makes inputs of one name one node): a
	// recomputation's masks are inputs of their own, drawn again
	mask := n.input(fmt.Sprintf("dropout.%d.%d.%d", layer, site, n.masks), data, s...)
	n.masks++
	for _, h := range n.hooks {
		h.mask(maskInput{node: mask, data: data, layer: layer, site: site})
	}
	d := dropMask{mask: mask}
	return d.apply(n, x), d
}

// maskList is the hook that lists every dropout mask input of a graph,
// in the order they were made: what its caller fills before each run.
type maskList struct {
	noHook
	all []maskInput
}

func (l *maskList) mask(mk maskInput) { l.all = append(l.all, mk) }
