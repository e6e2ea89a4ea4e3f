package models

// dropout.go: dropout as the graph holds it, a product with a mask input
// per site (the masks come from rng.go's generators or ops.DropoutMask,
// filled by the caller before each run), and the list of masks a graph
// feeds (maskList).

import (
	"fmt"

	G "gorgonia.org/gorgonia"

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
