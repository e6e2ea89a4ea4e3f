package models

import (
	"fmt"
	"math"

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
	train bool     // dropout masks (when cfg.Dropout > 0)
	kv    *KVCache // nil: attend over this graph's own T tokens

	wrt    map[string]G.Nodes // parameter name -> its nodes (c_attn: three row blocks)
	masks  []maskInput
	cores  []attnCore // every attention core built, in order
	passes []passRec  // a scheduled step's passes, as built

	stat        *RunningMean // updated on the input of layer 0's MLP half
	statGuard   bool         // recomputations do not update stat
	recomputing bool         // the forward being built is a recomputation
	statNodes   []*G.Node    // the update ops built (the step retains them)
	mp          *mixed       // a 16-bit precision policy's casts (mixed.go); nil: float32
	err         error
}

// attnCore is the middle of one attention: the (B*H, T, T) scores of q
// and k, their causal softmax, and that after dropout (the same node
// when there is none). Megatron's selective recomputation drops these and
// recomputes them from q and k for the backward.
type attnCore struct {
	layer                  int
	q, k                   *G.Node
	scores, probs, dropped *G.Node
	mask                   *G.Node // nil without dropout
	scale                  float64
}

// maskInput is one dropout mask fed to the graph.
type maskInput struct {
	node        *G.Node
	data        []float32
	layer, site int
}

func newBuilder(g *G.ExprGraph, cfg Config, p *Params, B, T int, train bool, kv *KVCache) *builder {
	return &builder{g: g, cfg: cfg, p: p, B: B, T: T, train: train, kv: kv, wrt: map[string]G.Nodes{}}
}

// do runs one graph-building call unless an earlier one failed; under a
// 16-bit precision policy its output is stored in that format (store).
func (n *builder) do(f func() (*G.Node, error)) *G.Node {
	if n.err != nil {
		return nil
	}
	x, err := f()
	if err != nil {
		n.err = err
		return x
	}
	return n.store(x)
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
	x := n.input(name, n.p.Slice(name), n.p.Shape(name)...)
	n.wrt[name] = G.Nodes{x}
	return x
}

// paramRows is rows [lo, hi) of a parameter's first axis as a node of its
// own (a view of the same memory): q, k and v of c_attn.
func (n *builder) paramRows(name, part string, lo, hi int) *G.Node {
	shape := n.p.Shape(name)
	row := 1
	for _, d := range shape[1:] {
		row *= d
	}
	sub := append([]int{hi - lo}, shape[1:]...)
	x := n.input(name+"."+part, n.p.Slice(name)[lo*row:hi*row], sub...)
	n.wrt[name] = append(n.wrt[name], x)
	return x
}

// embed is the token and position embedding of idx and pos (B*T): the
// residual stream x (B*T, C), with dropout.
func (n *builder) embed(idx, pos *G.Node) *G.Node {
	wte := n.param("transformer.wte.weight")
	tok := n.do(func() (*G.Node, error) { return arena.Gather(wte, idx) })                              // (B*T, C)
	ps := n.do(func() (*G.Node, error) { return arena.Gather(n.param("transformer.wpe.weight"), pos) }) // (B*T, C)
	x := n.do(func() (*G.Node, error) { return arena.Add(tok, ps) })                                    // (B*T, C)
	return n.dropout(x, 0, SiteEmbed)
}

// linear is y = x Wᵀ + b with W [out, in] read in place (MatMul with
// TransB): x (N, in) -> y (N, out).
func (n *builder) linear(x, w, b *G.Node) *G.Node {
	y := n.matmulW(x, w)                                              // (N, out)
	return n.do(func() (*G.Node, error) { return ops.AddBias(y, b) }) // (N, out)
}

// AddBias returns x (N, C) with b (C) added to every row (ops.AddBias),
// for graphs built outside this package (the tensor-parallel lab's).
func AddBias(x, b *G.Node) (*G.Node, error) { return ops.AddBias(x, b) }

// layerNorm is LayerNorm with the parameters name.weight and name.bias.
func (n *builder) layerNorm(x *G.Node, name string) *G.Node {
	return n.do(func() (*G.Node, error) { return ops.LayerNorm(x, n.param(name+".weight"), n.param(name+".bias")) }) // (B*T, C)
}

// attention is causal multi-head self-attention of layer l on h (B*T, C):
// q, k and v from the row blocks of c_attn [3C, C] = [Wq; Wk; Wv], each
// split into heads, softmax(q·kᵀ/√hs)·v per head, heads merged, c_proj.
func (n *builder) attention(h *G.Node, l int) *G.Node {
	B, T, C, H := n.B, n.T, n.cfg.Embd, n.cfg.Heads
	pre := fmt.Sprintf("transformer.h.%d.attn.", l)
	var qkv [3]*G.Node
	for i, part := range []string{"q", "k", "v"} {
		w := n.paramRows(pre+"c_attn.weight", part, i*C, (i+1)*C)                    // (C, C)
		b := n.paramRows(pre+"c_attn.bias", part, i*C, (i+1)*C)                      // (C)
		x := n.linear(h, w, b)                                                       // (B*T, C)
		qkv[i] = n.do(func() (*G.Node, error) { return ops.SplitHeads(x, B, T, H) }) // (B*H, T, hs)
	}
	var y *G.Node
	if n.kv != nil {
		y = n.do(func() (*G.Node, error) { return CachedAttention(qkv[0], qkv[1], qkv[2], n.kv, l) }) // (B*H, T, hs)
	} else {
		c := n.attnScores(attnCore{layer: l, q: qkv[0], k: qkv[1], scale: 1 / math.Sqrt(float64(n.cfg.HeadSize()))})
		n.cores = append(n.cores, c)
		y = n.do(func() (*G.Node, error) { return ops.CausalApply(c.dropped, qkv[2]) }) // (B*H, T, hs)
	}
	y = n.do(func() (*G.Node, error) { return ops.MergeHeads(y, B, T, H) }) // (B*T, C)
	y = n.linear(y, n.param(pre+"c_proj.weight"), n.param(pre+"c_proj.bias"))
	return n.dropout(y, l, SiteAttnResid) // (B*T, C)
}

// attnScores fills in c from its q and k: scores = q·kᵀ, the causal
// softmax of scores/√hs, dropout (with a new mask input unless c.mask is
// set: a recomputation passes the first pass's mask).
func (n *builder) attnScores(c attnCore) attnCore {
	c.scores = n.do(func() (*G.Node, error) { return ops.CausalScores(c.q, c.k) })          // (B*H, T, T), zero above the diagonal
	c.probs = n.do(func() (*G.Node, error) { return ops.CausalSoftmax(c.scores, c.scale) }) // (B*H, T, T)
	c.dropped = c.probs
	switch {
	case c.mask != nil:
		c.dropped = n.do(func() (*G.Node, error) { return arena.Masked(c.probs, c.mask) }) // (B*H, T, T)
	case n.train && n.cfg.Dropout > 0:
		c.dropped = n.dropout(c.probs, c.layer, SiteAttn) // (B*H, T, T)
		if len(n.masks) > 0 {
			c.mask = n.masks[len(n.masks)-1].node
		}
	}
	return c
}

// mlp is the 4x feed-forward of layer l: c_fc, exact GELU, c_proj.
func (n *builder) mlp(h *G.Node, l int) *G.Node {
	pre := fmt.Sprintf("transformer.h.%d.mlp.", l)
	f := n.linear(h, n.param(pre+"c_fc.weight"), n.param(pre+"c_fc.bias"))    // (B*T, 4C)
	f = n.do(func() (*G.Node, error) { return ops.GELU(f) })                  // (B*T, 4C)
	f = n.linear(f, n.param(pre+"c_proj.weight"), n.param(pre+"c_proj.bias")) // (B*T, C)
	return n.dropout(f, l, SiteMLP)
}

// attnHalf is the first half of block l: x + attention(ln_1(x)).
func (n *builder) attnHalf(x *G.Node, l int) *G.Node {
	h := n.layerNorm(x, fmt.Sprintf("transformer.h.%d.ln_1", l))                    // (B*T, C)
	return n.do(func() (*G.Node, error) { return arena.Add(x, n.attention(h, l)) }) // (B*T, C)
}

// mlpHalf is the second half of block l: x + mlp(ln_2(x)).
func (n *builder) mlpHalf(x *G.Node, l int) *G.Node {
	h := n.layerNorm(x, fmt.Sprintf("transformer.h.%d.ln_2", l))              // (B*T, C)
	return n.do(func() (*G.Node, error) { return arena.Add(x, n.mlp(h, l)) }) // (B*T, C)
}

// block is transformer block l: both halves.
func (n *builder) block(x *G.Node, l int) *G.Node { return n.mlpHalf(n.attnHalf(x, l), l) }

// head is the final LayerNorm and the language-model head, tied to the
// token embedding: x (B*T, C) -> logits (B*T, V).
func (n *builder) head(x *G.Node) *G.Node {
	x = n.layerNorm(x, "transformer.ln_f")
	return n.store(n.matmulW(x, n.param("transformer.wte.weight"))) // (B*T, V)
}

// dropout multiplies x by a mask input for (layer, site) when training
// with a positive dropout; otherwise it returns x itself (no node at all).
func (n *builder) dropout(x *G.Node, layer, site int) *G.Node {
	if !n.train || n.cfg.Dropout == 0 || n.err != nil {
		return x
	}
	s := x.Shape()
	data := make([]float32, s.TotalSize())
	// a name of its own (gorgonia makes inputs of one name one node): a
	// recomputation's masks are inputs of their own, filled like the first
	// pass's (stateless) or drawn again (stateful)
	mask := n.input(fmt.Sprintf("dropout.%d.%d.%d", layer, site, len(n.masks)), data, s...)
	n.masks = append(n.masks, maskInput{node: mask, data: data, layer: layer, site: site})
	return n.do(func() (*G.Node, error) { return arena.Masked(x, mask) })
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
