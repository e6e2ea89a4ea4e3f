package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/planner/arena"
)

// Backward adds to the graph the gradients of outputs with respect to
// wrt, given each output's gradient (gradOutputs: nodes of the outputs'
// shapes, usually inputs the caller fills, such as the loss's 1 or a
// block's upstream gradient). It is reverse mode over the ops on a path
// from wrt to an output, each op's SymDiff giving its inputs' gradient
// contributions; a node read by several ops gets the sum of their
// contributions, added left to right in the order the ops are reached
// going back from the outputs. Each wrt node is taken as an independent
// variable: the backward does not go below it (a segment's input is a leaf
// of the segment's backward). It returns the gradient of each wrt node
// (nil for one the outputs do not depend on).
//
// gorgonia.Grad does the same but sums with gorgonia's own Add, an op the
// arena would have to recognise by name; here every node of the backward
// is an op of this package or of package arena. And because the caller
// picks the outputs and their gradients, a block or half-block can be
// differentiated as a unit: the same ops in the same order as inside the
// whole model, so the gradients are bitwise the whole model's.
func Backward(outputs, gradOutputs, wrt G.Nodes) (G.Nodes, error) {
	return BackwardReading(outputs, gradOutputs, wrt, nil, nil)
}

// BackwardReading is Backward where the backward ops read read(n) in
// place of each forward value n they need (an op's inputs and output, as
// its SymDiff receives them); read returns n itself to keep it, and is
// called while the backward of the op reading n is built. Two labs need
// it: mixed precision keeps an activation for the backward as 16-bit
// storage and hands the backward its cast back up to float32; gradient
// checkpointing hands it the recomputed copy of a value the forward
// dropped. read must return a node of n's shape and type.
//
// as maps a node that stands in for a chain of ops (a fused op, ops.
// CausalAttend) to the chain's last node, of the same value: the backward
// passes the stand-in's gradient to the chain and goes down the chain's
// ops, as if the stand-in were the chain, so the gradients are bitwise
// the unfused graph's. as may be nil.
func BackwardReading(outputs, gradOutputs, wrt G.Nodes, read func(n *G.Node) (*G.Node, error), as map[*G.Node]*G.Node) (G.Nodes, error) {
	if len(outputs) != len(gradOutputs) {
		return nil, fmt.Errorf("backward: %d outputs, %d output gradients", len(outputs), len(gradOutputs))
	}
	leaf := make(map[*G.Node]bool, len(wrt))
	for _, w := range wrt {
		leaf[w] = true
	}
	kids := func(n *G.Node) G.Nodes {
		if chain, ok := as[n]; ok {
			return G.Nodes{chain}
		}
		return children(n)
	}
	order := topoOrder(outputs, leaf, kids)
	depends := make(map[*G.Node]bool, len(order)) // a wrt node is at or below it
	for _, w := range wrt {
		depends[w] = true
	}
	for _, n := range order {
		for _, c := range kids(n) {
			if depends[c] {
				depends[n] = true
			}
		}
	}
	contrib := make(map[*G.Node]G.Nodes, len(order))
	for i, o := range outputs {
		if !o.Shape().Eq(gradOutputs[i].Shape()) {
			return nil, fmt.Errorf("backward: output %v has shape %v, its gradient %v", o, o.Shape(), gradOutputs[i].Shape())
		}
		contrib[o] = append(contrib[o], gradOutputs[i])
	}
	grads := make(map[*G.Node]*G.Node, len(order))
	for i := len(order) - 1; i >= 0; i-- {
		n := order[i]
		if !depends[n] || len(contrib[n]) == 0 {
			continue
		}
		g, err := sumNodes(contrib[n])
		if err != nil {
			return nil, fmt.Errorf("backward: gradient of %v: %w", n, err)
		}
		grads[n] = g
		if n.Op() == nil || leaf[n] {
			continue
		}
		if chain, ok := as[n]; ok {
			contrib[chain] = append(contrib[chain], g)
			continue
		}
		in := children(n)
		if len(in) == 0 {
			continue // a constant
		}
		sd, ok := n.Op().(G.SDOp)
		if !ok {
			return nil, fmt.Errorf("backward: %v (%v) is not differentiable", n, n.Op())
		}
		diff := sd.DiffWRT(len(in))
		need := false
		for j, c := range in {
			need = need || diff[j] && depends[c]
		}
		if !need {
			continue
		}
		args, self := in, n
		if read != nil {
			if args, self, err = substitute(in, n, read); err != nil {
				return nil, fmt.Errorf("backward: %v: %w", n, err)
			}
		}
		gs, err := sd.SymDiff(args, self, g)
		if err != nil {
			return nil, fmt.Errorf("backward: %v (%v): %w", n, n.Op(), err)
		}
		for j, c := range in {
			if diff[j] && depends[c] && j < len(gs) && gs[j] != nil {
				contrib[c] = append(contrib[c], gs[j])
			}
		}
	}
	out := make(G.Nodes, len(wrt))
	for i, w := range wrt {
		out[i] = grads[w]
	}
	return out, nil
}

// substitute is what the backward of op node n reads: read of each
// input and of n.
func substitute(in G.Nodes, n *G.Node, read func(*G.Node) (*G.Node, error)) (G.Nodes, *G.Node, error) {
	swap := func(x *G.Node) (*G.Node, error) {
		r, err := read(x)
		switch {
		case err != nil:
			return nil, err
		case r == nil:
			return x, nil
		case !r.Shape().Eq(x.Shape()) || r.Dtype() != x.Dtype():
			return nil, fmt.Errorf("read(%v) is %v %v, want %v %v", x, r.Shape(), r.Dtype(), x.Shape(), x.Dtype())
		}
		return r, nil
	}
	args := make(G.Nodes, len(in))
	for i, c := range in {
		var err error
		if args[i], err = swap(c); err != nil {
			return nil, nil, err
		}
	}
	self, err := swap(n)
	return args, self, err
}

// sumNodes is ((a + b) + c) + …, or a alone.
func sumNodes(ns G.Nodes) (*G.Node, error) {
	s := ns[0]
	for _, n := range ns[1:] {
		var err error
		if s, err = arena.Add(s, n); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// children are the nodes n reads, in argument order.
func children(n *G.Node) G.Nodes {
	var out G.Nodes
	for it := n.Graph().From(n.ID()); it.Next(); {
		out = append(out, it.Node().(*G.Node))
	}
	return out
}

// topoOrder is every node the outputs depend on down to the leaves (a
// node's children as the function gives them), each
// after the nodes it reads (a depth-first post-order, children in argument
// order, so the order is the same for the same construction).
func topoOrder(outputs G.Nodes, leaf map[*G.Node]bool, children func(*G.Node) G.Nodes) G.Nodes {
	var order G.Nodes
	seen := map[*G.Node]bool{}
	var visit func(n *G.Node)
	visit = func(n *G.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !leaf[n] {
			for _, c := range children(n) {
				visit(c)
			}
		}
		order = append(order, n)
	}
	for _, o := range outputs {
		visit(o)
	}
	return order
}
