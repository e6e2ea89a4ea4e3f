package models

// builder.go: the graph builder the layer functions of layers.go are
// methods of, and the hook through which a pass (mixed.go, recompute.go,
// runningmean.go, dropout.go) changes or watches what they build.

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// builder builds the GPT's nodes into a graph, one method per layer as
// nanoGPT's model.py reads. A graph holds B rows of T tokens: the query
// length T. The keys are the same T tokens (training, evaluation, the
// full-window sampler) unless a KV cache is given, in which case they are
// the tokens the cache holds plus these T, at positions offset … offset+T-1
// where the offset is the cache's length at run time (prefill: 0; decode:
// the tokens so far). The position offset reaches the model through the
// pos input (filled by the caller) and the cache.
//
// The first error stops the building; later calls return nil, so the
// model reads top to bottom without a check per line.
type builder struct {
	g     *G.ExprGraph
	cfg   Config
	p     *Params
	B, T  int
	train bool               // dropout (when cfg.Dropout > 0)
	kv    *KVCache           // nil: attend over this graph's own T tokens
	wrt   map[string]G.Nodes // parameter name -> its nodes (c_attn: three row blocks)
	drop  *ops.DropoutKey    // the stateless masks' key, drawn in the kernels; nil: mask inputs (dropout.go)
	masks int                // dropout mask inputs made (dropout.go numbers their names)
	hooks []hook             // the passes applied as the graph is built, in order
	err   error
	// fuse builds each attention core as one op (a selective forward's:
	// fused); standIn maps each such op's node to the chain of ops it
	// stands for, which the backward differentiates (BackwardReading's
	// as) and the program never runs (unrun).
	fuse    bool
	standIn map[*G.Node]*G.Node
	unrun   map[*G.Node]bool
	// seq0 is the batch's first sequence this graph's rows hold (the
	// second half of a halved step: B of the batch's sequences from seq0);
	// rows, when set, keeps each parameter row block's node so that the
	// two halves read one (paramRows).
	seq0 int
	rows map[string]*G.Node
}

// hook is how a pass over the graph is applied while the layers build it:
// the builder calls every hook, in order, at each of the points below.
// A pass embeds noHook and implements the points it needs: the casts of
// a precision policy (mixed: output, matmul, read, copyOf), the int8
// weights (int8Pass: paramNode, matmul, gather), the record of
// a scheduled step (passLog: core, mask), the running statistic
// (runningMean: forward), the dropout masks a graph feeds (maskList:
// mask).
type hook interface {
	// output sees each op output x the layers make (in builder.do); the
	// graph's readers of x read the node it returns instead.
	output(x *G.Node) (*G.Node, error)
	// matmul makes x·wᵀ for a weight w [out, in] (a linear layer's
	// product, the head's), or returns nil to leave it to the next hook
	// (after the last: arena.MatMul).
	matmul(x, w *G.Node) (*G.Node, error)
	// paramNode is the node of rows [lo, hi) of the parameter name (all of
	// it when hi is 0) when a pass holds it in another form (int8), or nil
	// for the Params' float32 view.
	paramNode(g *G.ExprGraph, name string, lo, hi int) *G.Node
	// gather makes the rows idx of an embedding table w (a node paramNode
	// made), or returns nil to leave it to the next hook (after the last:
	// arena.Gather).
	gather(w, idx *G.Node) (*G.Node, error)
	// read is what a reader after the forward (a backward, a
	// recomputation) reads for the forward value x, or nil for x itself.
	read(x *G.Node) (*G.Node, error)
	// copyOf is the node the forward value x is kept as (nil: x itself);
	// two values kept as one node are the same value.
	copyOf(x *G.Node) *G.Node
	// forward sees the start of a forward of segment seg on its input in
	// (nil for the embedding) in a scheduled step; again marks a
	// recomputation.
	forward(n *builder, seg Segment, in *G.Node, again bool)
	// core sees each attention core the layers make (layers.go).
	core(c attnCore)
	// mask sees each dropout mask input the layers make (dropout.go).
	mask(mk maskInput)
}

// noHook implements every point of hook as doing nothing.
type noHook struct{}

func (noHook) output(x *G.Node) (*G.Node, error)                { return x, nil }
func (noHook) matmul(_, _ *G.Node) (*G.Node, error)             { return nil, nil }
func (noHook) paramNode(*G.ExprGraph, string, int, int) *G.Node { return nil }
func (noHook) gather(_, _ *G.Node) (*G.Node, error)             { return nil, nil }
func (noHook) read(*G.Node) (*G.Node, error)                    { return nil, nil }
func (noHook) copyOf(*G.Node) *G.Node                           { return nil }
func (noHook) forward(*builder, Segment, *G.Node, bool)         {}
func (noHook) core(attnCore)                                    {}
func (noHook) mask(maskInput)                                   {}

func newBuilder(g *G.ExprGraph, cfg Config, p *Params, B, T int, train bool, kv *KVCache, hooks ...hook) *builder {
	return &builder{g: g, cfg: cfg, p: p, B: B, T: T, train: train, kv: kv, wrt: map[string]G.Nodes{}, hooks: hooks,
		standIn: map[*G.Node]*G.Node{}, unrun: map[*G.Node]bool{}}
}

// do runs one graph-building call unless an earlier one failed, and hands
// its output to the hooks (output).
func (n *builder) do(f func() (*G.Node, error)) *G.Node {
	if n.err != nil {
		return nil
	}
	x, err := f()
	if err != nil {
		n.err = err
		return x
	}
	if n.err != nil { // a call inside f failed
		return x
	}
	for _, h := range n.hooks {
		if x, err = h.output(x); err != nil {
			n.err = err
			return nil
		}
	}
	return x
}

// matmul is x·wᵀ for a weight w [out, in] (MatMul with TransB: w read in
// place): x (N, in) -> (N, out), made by the first hook that makes it.
func (n *builder) matmul(x, w *G.Node) (*G.Node, error) {
	for _, h := range n.hooks {
		if y, err := h.matmul(x, w); err != nil || y != nil {
			return y, err
		}
	}
	return arena.MatMul(x, w, false, true)
}

// gather is the rows idx of the embedding table w, made by the first hook
// that makes it.
func (n *builder) gather(w, idx *G.Node) (*G.Node, error) {
	for _, h := range n.hooks {
		if y, err := h.gather(w, idx); err != nil || y != nil {
			return y, err
		}
	}
	return arena.Gather(w, idx)
}

// hookWeight is the node a hook holds for rows [lo, hi) of parameter
// name (hi 0: all of it), or nil.
func (n *builder) hookWeight(name string, lo, hi int) *G.Node {
	for _, h := range n.hooks {
		if x := h.paramNode(n.g, name, lo, hi); x != nil {
			return x
		}
	}
	return nil
}

// reread is what a reader after the forward reads for the forward value
// x: the first hook's substitute, or nil for x itself (BackwardReading's
// read).
func (n *builder) reread(x *G.Node) (*G.Node, error) {
	for _, h := range n.hooks {
		if r, err := h.read(x); err != nil || r != nil {
			return r, err
		}
	}
	return nil, nil
}

// storesF32 reports whether the forward's values are kept as they are
// made: no hook stores them in 16 bits, so a fused op may stand in for a
// chain whose values nothing rounds.
func (n *builder) storesF32() bool {
	for _, h := range n.hooks {
		if mp, ok := h.(*mixed); ok && mp.act != arena.F32 {
			return false
		}
	}
	return true
}

// same reports whether v is the forward value x: x itself or another
// face of the node x is kept as (copyOf).
func (n *builder) same(v, x *G.Node) bool {
	if v == x {
		return true
	}
	for _, h := range n.hooks {
		if c := h.copyOf(x); c != nil {
			return h.copyOf(v) == c
		}
	}
	return false
}

// input adds a node bound to data viewed as shape.
func (n *builder) input(name string, data any, shape ...int) *G.Node {
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	return G.NewTensor(n.g, t.Dtype(), len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(t))
}

// param is the node of a parameter (its storage in the Params), made
// once: the token embedding read by the embedding and the head is one
// node, so its two gradients are summed by Backward.
func (n *builder) param(name string) *G.Node {
	if x, ok := n.wrt[name]; ok {
		return x[0]
	}
	x := n.hookWeight(name, 0, 0)
	if x == nil {
		x = n.input(name, n.p.Slice(name), n.p.Shape(name)...)
	}
	n.wrt[name] = G.Nodes{x}
	return x
}

// paramRows is rows [lo, hi) of a parameter's first axis as a node of its
// own (a view of the same memory): q, k and v of c_attn.
func (n *builder) paramRows(name, part string, lo, hi int) *G.Node {
	if x, ok := n.rows[name+"."+part]; ok {
		return x
	}
	x := n.hookWeight(name, lo, hi)
	if x == nil {
		shape := n.p.Shape(name)
		row := 1
		for _, d := range shape[1:] {
			row *= d
		}
		sub := append([]int{hi - lo}, shape[1:]...)
		x = n.input(name+"."+part, n.p.Slice(name)[lo*row:hi*row], sub...)
	}
	n.wrt[name] = append(n.wrt[name], x)
	if n.rows != nil {
		n.rows[name+"."+part] = x
	}
	return x
}

// paramNodes lists every parameter node in the order of Params.Names (the
// three row blocks of c_attn in order), and the number of nodes of each.
func (n *builder) paramNodes() (G.Nodes, []int) {
	var all G.Nodes
	counts := make([]int, len(n.p.Names()))
	for i, name := range n.p.Names() {
		all = append(all, n.wrt[name]...)
		counts[i] = len(n.wrt[name])
	}
	return all, counts
}
