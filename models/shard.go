package models

// shard.go: tensor parallelism, a transformer block split Megatron-style
// over ranks (BlockShard), each piece built from the layer functions on
// its slice of the parameters.

import (
	"errors"
	"fmt"
	"slices"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// BlockShard is the part of one transformer block that rank `Rank` of
// `Size` computes when the block is split Megatron-style (Shoeybi et al.
// 2019): the attention of its share of the heads (column-parallel q, k, v:
// c_attn's rows for those heads; row-parallel projection: c_proj's
// columns for them) and the MLP's share of the hidden units (column-
// parallel c_fc: its rows; row-parallel c_proj: its columns). It knows no
// processes or collectives: each of its two parallel parts gives a
// partial output that the caller sums over the ranks (the all-reduce of
// the forward) before adding the projection's bias (once) and the
// residual; backward, each gives a partial gradient of its input (the
// LayerNorm's output) that the caller sums likewise (the all-reduce of
// the backward). The LayerNorms, replicated on every rank, are parts of
// their own.
//
// The shard holds copies of its slices of the parameters (a column slice
// of a row-major matrix is not contiguous) and reports their gradients in
// the shard's layout; ParamSlices maps them back. Dropout is not
// supported: a tensor-parallel block's masks would have to be the ones of
// the whole block's heads.
type BlockShard struct {
	Layer, Rank, Size int
	LN1, Attn         *ShardPart
	LN2, MLP          *ShardPart
	heads             [2]int // [h0, h1)
	hidden            [2]int // [u0, u1)
}

// ShardPart is one compiled piece of a tensor-parallel block: a forward
// program (in -> out) and a training program (in, dout -> din and the
// gradients of the piece's parameters).
type ShardPart struct {
	names      []string             // its parameters, as the shard names them
	data       map[string][]float32 // their values (copies of the model's slices)
	fwd, train *partProgram
}

type partProgram struct {
	exec     executor
	in, dout []float32
	out, din *G.Node
	grads    map[string]*G.Node
}

// NewBlockShard builds rank's shard of block layer of size ranks, for
// batches (B, T) on the parameters p. The heads and the hidden units must
// divide evenly among the ranks.
func NewBlockShard(cfg Config, p *Params, layer, rank, size, B, T int, opts ...ModelOption) (*BlockShard, error) {
	if err := checkShape(cfg, p, B, T); err != nil {
		return nil, err
	}
	H, C := cfg.Heads, cfg.Embd
	switch {
	case layer < 0 || layer >= cfg.Layers:
		return nil, fmt.Errorf("%w: layer %d of %d", ErrConfig, layer, cfg.Layers)
	case size < 1 || rank < 0 || rank >= size:
		return nil, fmt.Errorf("%w: rank %d of %d", ErrConfig, rank, size)
	case H%size != 0:
		return nil, fmt.Errorf("%w: %d heads do not split over %d ranks", ErrConfig, H, size)
	case cfg.Dropout != 0:
		return nil, fmt.Errorf("%w: a tensor-parallel shard runs without dropout (dropout %v)", ErrConfig, cfg.Dropout)
	}
	hs := C / H
	s := &BlockShard{Layer: layer, Rank: rank, Size: size}
	s.heads = [2]int{rank * H / size, (rank + 1) * H / size}
	s.hidden = [2]int{rank * 4 * C / size, (rank + 1) * 4 * C / size}
	pre := fmt.Sprintf("transformer.h.%d.", layer)
	rows := func(name string, lo, hi int) []float32 { // rows [lo, hi) of a parameter
		row := 1
		for _, d := range p.Shape(name)[1:] {
			row *= d
		}
		return slices.Clone(p.Slice(name)[lo*row : hi*row])
	}
	cols := func(name string, lo, hi int) []float32 { // columns [lo, hi) of a matrix
		sh := p.Shape(name)
		out := make([]float32, 0, sh[0]*(hi-lo))
		for r := range sh[0] {
			out = append(out, p.Slice(name)[r*sh[1]+lo:r*sh[1]+hi]...)
		}
		return out
	}
	h0, h1 := s.heads[0]*hs, s.heads[1]*hs
	u0, u1 := s.hidden[0], s.hidden[1]
	Hs, Cs, Us := s.heads[1]-s.heads[0], h1-h0, u1-u0
	var err error
	o := modelOptions{arena: defaultArena()}
	for _, opt := range opts {
		opt(&o)
	}
	if s.LN1, err = newShardPart(cfg, B, T, o, map[string][]float32{
		"ln.weight": slices.Clone(p.Slice(pre + "ln_1.weight")), "ln.bias": slices.Clone(p.Slice(pre + "ln_1.bias")),
	}, func(n *builder, x *G.Node, w func(string, ...int) *G.Node) *G.Node {
		return n.do(func() (*G.Node, error) { return ops.LayerNorm(x, w("ln.weight", C), w("ln.bias", C)) }) // (B*T, C)
	}); err != nil {
		return nil, err
	}
	if s.LN2, err = newShardPart(cfg, B, T, o, map[string][]float32{
		"ln.weight": slices.Clone(p.Slice(pre + "ln_2.weight")), "ln.bias": slices.Clone(p.Slice(pre + "ln_2.bias")),
	}, func(n *builder, x *G.Node, w func(string, ...int) *G.Node) *G.Node {
		return n.do(func() (*G.Node, error) { return ops.LayerNorm(x, w("ln.weight", C), w("ln.bias", C)) }) // (B*T, C)
	}); err != nil {
		return nil, err
	}
	attn := map[string][]float32{"proj.weight": cols(pre+"attn.c_proj.weight", h0, h1)}
	for i, part := range []string{"q", "k", "v"} {
		attn[part+".weight"] = rows(pre+"attn.c_attn.weight", i*C+h0, i*C+h1)
		attn[part+".bias"] = rows(pre+"attn.c_attn.bias", i*C+h0, i*C+h1)
	}
	if s.Attn, err = newShardPart(cfg, B, T, o, attn, func(n *builder, h *G.Node, w func(string, ...int) *G.Node) *G.Node {
		var qkv [3]*G.Node // each its Hs heads in place
		for i, part := range []string{"q", "k", "v"} {
			qkv[i] = n.linear(h, w(part+".weight", Cs, C), w(part+".bias", Cs)) // (B*T, C/P)
		}
		att := n.attnCore(qkv[0], qkv[1], layer, Hs).dropped                                                  // (B*H/P, T, T)
		y := n.do(func() (*G.Node, error) { return ops.CausalApplyHeads(att, qkv[2], Hs) })                   // (B*T, C/P)
		return n.do(func() (*G.Node, error) { return arena.MatMul(y, w("proj.weight", C, Cs), false, true) }) // (B*T, C) partial
	}); err != nil {
		return nil, err
	}
	if s.MLP, err = newShardPart(cfg, B, T, o, map[string][]float32{
		"fc.weight": rows(pre+"mlp.c_fc.weight", u0, u1), "fc.bias": rows(pre+"mlp.c_fc.bias", u0, u1),
		"proj.weight": cols(pre+"mlp.c_proj.weight", u0, u1),
	}, func(n *builder, h *G.Node, w func(string, ...int) *G.Node) *G.Node {
		f := n.linear(h, w("fc.weight", Us, C), w("fc.bias", Us))                                             // (B*T, 4C/P)
		f = n.do(func() (*G.Node, error) { return ops.GELU(f) })                                              // (B*T, 4C/P)
		return n.do(func() (*G.Node, error) { return arena.MatMul(f, w("proj.weight", C, Us), false, true) }) // (B*T, C) partial
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// newShardPart compiles one piece: build makes its forward on input x
// (B*T, C), reading its parameters through w(name, shape...).
func newShardPart(cfg Config, B, T int, o modelOptions, data map[string][]float32, build func(n *builder, x *G.Node, w func(string, ...int) *G.Node) *G.Node) (*ShardPart, error) {
	sp := &ShardPart{data: data}
	for name := range data {
		sp.names = append(sp.names, name)
	}
	slices.Sort(sp.names)
	mk := func(train bool) (*partProgram, error) {
		g := G.NewGraph()
		n := newBuilder(g, cfg, nil, B, T, false, nil)
		N, C := B*T, cfg.Embd
		pp := &partProgram{in: make([]float32, N*C), grads: map[string]*G.Node{}}
		x := n.input("x", pp.in, N, C)
		nodes := map[string]*G.Node{}
		w := func(name string, shape ...int) *G.Node {
			if nd, ok := nodes[name]; ok {
				return nd
			}
			nd := n.input(name, data[name], shape...)
			nodes[name] = nd
			return nd
		}
		pp.out = build(n, x, w) // (B*T, C)
		if n.err != nil {
			return nil, n.err
		}
		retain := G.Nodes{pp.out}
		if train {
			pp.dout = make([]float32, N*C)
			dy := n.input("dy", pp.dout, N, C)
			wrt := G.Nodes{x}
			for _, name := range sp.names {
				wrt = append(wrt, nodes[name])
			}
			gs, err := Backward(G.Nodes{pp.out}, G.Nodes{dy}, wrt)
			if err != nil {
				return nil, err
			}
			pp.din = gs[0]
			for i, name := range sp.names {
				pp.grads[name] = gs[i+1]
			}
			retain = append(retain, gs...)
		}
		exec, err := newExecutor(g, retain, o)
		if err != nil {
			return nil, err
		}
		pp.exec = exec
		return pp, nil
	}
	var err error
	if sp.fwd, err = mk(false); err != nil {
		return nil, err
	}
	if sp.train, err = mk(true); err != nil {
		return nil, err
	}
	return sp, nil
}

// Forward runs the piece on x (B*T, C); the result belongs to the piece.
func (sp *ShardPart) Forward(x []float32) ([]float32, error) {
	copy(sp.fwd.in, x)
	if err := sp.fwd.exec.run(); err != nil {
		return nil, err
	}
	return f32Of(sp.fwd.exec.value(sp.fwd.out)), nil
}

// Backward recomputes the piece on x and propagates dout, the gradient of
// its output, back to its input (returned) and its parameters (Grad).
func (sp *ShardPart) Backward(x, dout []float32) ([]float32, error) {
	copy(sp.train.in, x)
	copy(sp.train.dout, dout)
	if err := sp.train.exec.run(); err != nil {
		return nil, err
	}
	return f32Of(sp.train.exec.value(sp.train.din)), nil
}

// Params names the piece's parameters, sorted.
func (sp *ShardPart) Params() []string { return sp.names }

// Grad is the gradient of a piece parameter after the last Backward, in
// the shard's layout (nil for a name the piece does not have).
func (sp *ShardPart) Grad(name string) []float32 {
	g, ok := sp.train.grads[name]
	if !ok {
		return nil
	}
	return f32Of(sp.train.exec.value(g))
}

// ParamSlices says where a shard parameter's elements sit in the model's
// parameters: the model's name, and for each row of the shard's tensor the
// offset in that parameter's data where it goes (rows of the shard are
// contiguous runs of the model's parameter).
func (s *BlockShard) ParamSlices(part *ShardPart, name string, cfg Config) (string, []int, int, error) {
	C, hs := cfg.Embd, cfg.Embd/cfg.Heads
	h0, h1 := s.heads[0]*hs, s.heads[1]*hs
	u0, u1 := s.hidden[0], s.hidden[1]
	pre := fmt.Sprintf("transformer.h.%d.", s.Layer)
	ret := func(model string, starts []int, width int) (string, []int, int, error) {
		return model, starts, width, nil
	}
	seq := func(from, rows, stride int) []int {
		out := make([]int, rows)
		for i := range out {
			out[i] = from + i*stride
		}
		return out
	}
	switch {
	case part == s.LN1 || part == s.LN2:
		ln := map[*ShardPart]string{s.LN1: "ln_1", s.LN2: "ln_2"}[part]
		return ret(pre+ln+"."+name[len("ln."):], []int{0}, C)
	case part == s.Attn:
		for i, qkv := range []string{"q", "k", "v"} {
			switch name {
			case qkv + ".weight":
				return ret(pre+"attn.c_attn.weight", seq((i*C+h0)*C, h1-h0, C), C)
			case qkv + ".bias":
				return ret(pre+"attn.c_attn.bias", []int{i*C + h0}, h1-h0)
			}
		}
		if name == "proj.weight" {
			return ret(pre+"attn.c_proj.weight", seq(h0, C, C), h1-h0)
		}
	case part == s.MLP:
		switch name {
		case "fc.weight":
			return ret(pre+"mlp.c_fc.weight", seq(u0*C, u1-u0, C), C)
		case "fc.bias":
			return ret(pre+"mlp.c_fc.bias", []int{u0}, u1-u0)
		case "proj.weight":
			return ret(pre+"mlp.c_proj.weight", seq(u0, C, 4*C), u1-u0)
		}
	}
	return "", nil, 0, fmt.Errorf("%w: shard parameter %q", ErrConfig, name)
}

// Close releases the shard's programs.
func (s *BlockShard) Close() error {
	var err error
	for _, p := range []*ShardPart{s.LN1, s.Attn, s.LN2, s.MLP} {
		err = errors.Join(err, p.fwd.exec.close(), p.train.exec.close())
	}
	return err
}
