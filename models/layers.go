package models

// layers.go: the GPT as nanoGPT's model.py reads, one builder method per
// layer, top to bottom: embedding, linear, LayerNorm, attention, MLP, the
// two halves of a block, the head. Nothing here recomputes, casts or
// shards: those passes hook into the builder (builder.go).

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// embed is the token and position embedding of idx and pos (B*T): the
// residual stream x (B*T, C), with dropout.
func (n *builder) embed(idx, pos *G.Node) *G.Node {
	wte := n.param("transformer.wte.weight")
	tok := n.do(func() (*G.Node, error) { return n.gather(wte, idx) })                                  // (B*T, C)
	ps := n.do(func() (*G.Node, error) { return arena.Gather(n.param("transformer.wpe.weight"), pos) }) // (B*T, C)
	x := n.do(func() (*G.Node, error) { return arena.Add(tok, ps) })                                    // (B*T, C)
	return n.dropout(x, 0, SiteEmbed)                                                                   // (B*T, C)
}

// linear is y = x Wᵀ + b with W [out, in] read in place: x (N, in) ->
// y (N, out), one op (as torch's addmm) whose output the hooks see once.
func (n *builder) linear(x, w, b *G.Node) *G.Node {
	return n.do(func() (*G.Node, error) {
		y, err := n.matmul(x, w) // (N, out)
		if err != nil {
			return nil, err
		}
		return ops.AddBias(y, b) // (N, out)
	})
}

// layerNorm is LayerNorm with the parameters name.weight and name.bias.
func (n *builder) layerNorm(x *G.Node, name string) *G.Node {
	return n.do(func() (*G.Node, error) { return ops.LayerNorm(x, n.param(name+".weight"), n.param(name+".bias")) }) // (B*T, C)
}

// attention is causal multi-head self-attention of layer l on h (B*T, C):
// q, k and v from the row blocks of c_attn [3C, C] = [Wq; Wk; Wv],
// softmax(q·kᵀ/√hs)·v per head, c_proj. The heads are read where the
// linear layers write them and written where c_proj reads them (the
// causal ops' heads in place: no SplitHeads or MergeHeads); the KV cache
// keeps them split.
func (n *builder) attention(h *G.Node, l int) *G.Node {
	B, T, C, H := n.B, n.T, n.cfg.Embd, n.cfg.Heads
	pre := fmt.Sprintf("transformer.h.%d.attn.", l)
	var qkv [3]*G.Node
	for i, part := range []string{"q", "k", "v"} {
		w := n.paramRows(pre+"c_attn.weight", part, i*C, (i+1)*C) // (C, C)
		b := n.paramRows(pre+"c_attn.bias", part, i*C, (i+1)*C)   // (C)
		qkv[i] = n.linear(h, w, b)                                // (B*T, C)
	}
	var y *G.Node
	if n.kv != nil {
		for i, x := range qkv {
			qkv[i] = n.do(func() (*G.Node, error) { return ops.SplitHeads(x, B, T, H) }) // (B*H, T, hs)
		}
		y = n.do(func() (*G.Node, error) { return CachedAttention(qkv[0], qkv[1], qkv[2], n.kv, l) }) // (B*H, T, hs)
		y = n.do(func() (*G.Node, error) { return ops.MergeHeads(y, B, T, H) })                       // (B*T, C)
	} else {
		first := len(n.g.AllNodes())
		c := n.attnCore(qkv[0], qkv[1], l, H)                                                                      // (B*H, T, T)
		y = n.do(func() (*G.Node, error) { return ops.CausalApplyHeads(c.dropped, qkv[2], H, n.causalOpts()...) }) // (B*T, C)
		if n.fuse {
			y = n.fused(c, qkv[2], y, first) // (B*T, C)
		}
	}
	y = n.linear(y, n.param(pre+"c_proj.weight"), n.param(pre+"c_proj.bias")) // (B*T, C)
	return n.dropout(y, l, SiteAttnResid)                                     // (B*T, C)
}

// attnCore is the middle of one attention: the (B*H, T, T) softmax of
// the scores q·kᵀ/√hs of the causal pairs (one fused op), and that after
// dropout. The hooks see it whole (core): Megatron's selective
// recomputation drops it and rebuilds it from q and k for the backward.
type attnCore struct {
	layer          int
	heads          int // q and k are (B*T, C) with this many heads in place
	q, k           *G.Node
	probs, dropped *G.Node // dropped is probs without dropout
	drop           dropMask
}

// attnCore builds the core of layer l's attention on q and k (B*T, C),
// each H heads in place, whose output is c.dropped (B*H, T, T).
func (n *builder) attnCore(q, k *G.Node, l, H int) attnCore {
	c := attnCore{layer: l, heads: H, q: q, k: k}
	c.probs = n.causalSoftmax(q, k, H)                      // (B*H, T, T)
	c.dropped, c.drop = n.dropoutMask(c.probs, l, SiteAttn) // (B*H, T, T)
	for _, h := range n.hooks {
		h.core(c)
	}
	return c
}

// fused is core c's product with v in one op (ops.CausalAttend), which
// never writes the (B*H, T, T) probabilities: the forward of a selective
// pass, whose backward recomputes them. It stands in for chain (c's ops
// and CausalApply, made from node first on), which stays in the graph for
// the backward to differentiate and is never run.
func (n *builder) fused(c attnCore, v, chain *G.Node, first int) *G.Node {
	y := n.do(func() (*G.Node, error) {
		if s := c.drop.site; s != nil {
			return ops.CausalAttendHeadsDropout(c.q, c.k, v, *s, n.T, c.heads, n.attnScale())
		}
		return ops.CausalAttendHeads(c.q, c.k, v, c.drop.mask, n.T, c.heads, n.attnScale())
	}) // (B*T, C)
	if n.err != nil {
		return chain
	}
	for _, x := range n.g.AllNodes()[first:] {
		if x.Op() != nil && x != y {
			n.unrun[x] = true
		}
	}
	n.standIn[y] = chain
	return y
}

// causalSoftmax is softmax(q·kᵀ/√hs) over the causal pairs (each query
// and the keys at or before it) of q and k (B*T, C), H heads in place, in
// one op (ops.CausalProbsHeads): the scores q·kᵀ are never a tensor of
// their own.
func (n *builder) causalSoftmax(q, k *G.Node, H int) *G.Node {
	return n.do(func() (*G.Node, error) { return ops.CausalProbsHeads(q, k, n.T, H, n.attnScale(), n.causalOpts()...) }) // (B*H, T, T)
}

// causalOpts are the options of the attention's causal products: under a
// 16-bit policy, the scores' gradient in its format (ops.GradientsIn: the
// fused scores are a value the policy would store); on the bf16 policy's
// speed path (the linear layers on internal/bf16gemm), bf16 products too
// (ops.BF16Products), as torch.autocast runs the attention's matmuls in
// bf16; none under f32.
func (n *builder) causalOpts() []ops.CausalOption {
	var opts []ops.CausalOption
	for _, h := range n.hooks {
		if mp, ok := h.(*mixed); ok {
			opts = append(opts, ops.GradientsIn(mp.act))
			if mp.gemm16 {
				opts = append(opts, ops.BF16Products())
			}
		}
	}
	return opts
}

// attnScale is the scores' scale 1/√hs.
func (n *builder) attnScale() float64 { return 1 / math.Sqrt(float64(n.cfg.HeadSize())) }

// mlp is the 4x feed-forward of layer l: c_fc, exact GELU, c_proj.
func (n *builder) mlp(h *G.Node, l int) *G.Node {
	pre := fmt.Sprintf("transformer.h.%d.mlp.", l)
	f := n.linear(h, n.param(pre+"c_fc.weight"), n.param(pre+"c_fc.bias"))    // (B*T, 4C)
	f = n.do(func() (*G.Node, error) { return ops.GELU(f) })                  // (B*T, 4C)
	f = n.linear(f, n.param(pre+"c_proj.weight"), n.param(pre+"c_proj.bias")) // (B*T, C)
	return n.dropout(f, l, SiteMLP)                                           // (B*T, C)
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
	x = n.layerNorm(x, "transformer.ln_f")                                                         // (B*T, C)
	return n.do(func() (*G.Node, error) { return n.matmul(x, n.param("transformer.wte.weight")) }) // (B*T, V)
}

// AddBias returns x (N, C) with b (C) added to every row (ops.AddBias),
// for graphs built outside this package (the tensor-parallel lab's).
func AddBias(x, b *G.Node) (*G.Node, error) { return ops.AddBias(x, b) }
