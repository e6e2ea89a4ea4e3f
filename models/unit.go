package models

import (
	"errors"
	"fmt"

	"gptlab/models/ops"

	G "gorgonia.org/gorgonia"
)

// SegmentKind is what a segment of the GPT's forward computes.
type SegmentKind int

// The segments, in the order of the chain.
const (
	SegEmbed SegmentKind = iota // tokens -> x: token and position embeddings, dropout
	SegAttn                     // x -> x + attention(ln_1(x)) of one layer
	SegMLP                      // x -> x + mlp(ln_2(x)) of one layer
	SegHead                     // x -> logits, loss: ln_f, the tied head, cross-entropy
)

// Segment is one link of the GPT's forward seen as a chain at half-block
// granularity: the embedding, the attention half and the MLP half of each
// layer, the head. Every link but the ends maps the residual stream
// (B*T, C) to the next one.
type Segment struct {
	Kind  SegmentKind
	Layer int // for SegAttn and SegMLP
}

// String names the segment: "embed", "attn 0", "mlp 0", "head".
func (s Segment) String() string {
	switch s.Kind {
	case SegEmbed:
		return "embed"
	case SegAttn:
		return fmt.Sprintf("attn %d", s.Layer)
	case SegMLP:
		return fmt.Sprintf("mlp %d", s.Layer)
	case SegHead:
		return "head"
	}
	return fmt.Sprintf("Segment(%d, %d)", s.Kind, s.Layer)
}

// Chain is the forward of cfg as segments, first to last.
func Chain(cfg Config) []Segment {
	out := []Segment{{Kind: SegEmbed}}
	for l := range cfg.Layers {
		out = append(out, Segment{Kind: SegAttn, Layer: l}, Segment{Kind: SegMLP, Layer: l})
	}
	return append(out, Segment{Kind: SegHead})
}

// Unit is one segment of the GPT built and compiled on its own, on given
// inputs, with its own backward: a forward program (x -> y) and a training
// program that recomputes the forward from x and propagates an upstream
// gradient dy back to dx and to the segment's parameters. Checkpointing
// runs exactly that in its backward pass. The segment's nodes come from
// the same layer functions as the whole model's, and Backward sums the
// same contributions in the same order, so the units composed over the
// chain give the whole model's loss and gradients bitwise (unit_test.go);
// the token embedding, read by the embedding and by the head, gets one
// gradient from each, which the caller adds.
type Unit struct {
	Seg        Segment
	cfg        Config
	params     *Params
	B, T       int
	fwd, train *unitGraph
	dropKey    ops.DropoutKey // the masks' seed and step, read by the programs' dropout ops
}

// unitGraph is one compiled program of a unit and its inputs.
type unitGraph struct {
	exec          executor
	x, dy         []float32 // backing of the x and dy inputs (nil where the segment has none)
	idx, pos, tgt []int
	out           *G.Node   // y, or the loss for the head
	logits        *G.Node   // the head's
	dx            *G.Node   // training: the input's gradient (nil for the embedding)
	names         []string  // training: the segment's parameters
	grads         []G.Nodes // training: their gradient parts
}

// NewUnit builds and compiles segment seg of the GPT for batches (B, T)
// on the parameters p. opts choose the executor as for NewModel.
func NewUnit(cfg Config, p *Params, seg Segment, B, T int, opts ...ModelOption) (*Unit, error) {
	if err := checkShape(cfg, p, B, T); err != nil {
		return nil, err
	}
	if seg.Kind < SegEmbed || seg.Kind > SegHead || (seg.Kind == SegAttn || seg.Kind == SegMLP) && (seg.Layer < 0 || seg.Layer >= cfg.Layers) {
		return nil, fmt.Errorf("%w: segment %v of a %d-layer model", ErrConfig, seg, cfg.Layers)
	}
	o := modelOptions{arena: defaultArena()}
	for _, opt := range opts {
		opt(&o)
	}
	u := &Unit{Seg: seg, cfg: cfg, params: p, B: B, T: T}
	var err error
	if u.fwd, err = u.build(false, o); err != nil {
		return nil, err
	}
	if u.train, err = u.build(true, o); err != nil {
		return nil, err
	}
	return u, nil
}

// build makes one program of the unit: the forward alone, or with train
// the forward and its backward from dy.
func (u *Unit) build(train bool, o modelOptions) (*unitGraph, error) {
	g := G.NewGraph()
	n := newBuilder(g, u.cfg, u.params, u.B, u.T, true, nil) // a training segment: dropout in both programs
	n.drop = &u.dropKey
	N, C := u.B*u.T, u.cfg.Embd
	gr := &unitGraph{}
	var x *G.Node
	switch u.Seg.Kind {
	case SegEmbed:
		gr.idx, gr.pos = make([]int, N), make([]int, N)
		for i := range gr.pos {
			gr.pos[i] = i % u.T
		}
		gr.out = n.embed(n.input("idx", gr.idx, N), n.input("pos", gr.pos, N)) // (B*T, C)
	default:
		gr.x = make([]float32, N*C)
		x = n.input("x", gr.x, N, C) // (B*T, C)
		switch u.Seg.Kind {
		case SegAttn:
			gr.out = n.attnHalf(x, u.Seg.Layer) // (B*T, C)
		case SegMLP:
			gr.out = n.mlpHalf(x, u.Seg.Layer) // (B*T, C)
		case SegHead:
			gr.tgt = make([]int, N)
			gr.logits = n.head(x)                                                                                        // (B*T, V)
			gr.out = n.do(func() (*G.Node, error) { return ops.CrossEntropy(gr.logits, n.input("targets", gr.tgt, N)) }) // (1)
		}
	}
	if n.err != nil {
		return nil, fmt.Errorf("build %v: %w", u.Seg, n.err)
	}
	retain := G.Nodes{gr.out}
	if gr.logits != nil { // the head's logits stay live to the end of the program
		retain = append(retain, gr.logits)
	}
	if train {
		var dy *G.Node
		if u.Seg.Kind == SegHead {
			dy = n.input("dloss", []float32{1}, 1)
		} else {
			gr.dy = make([]float32, N*C)
			dy = n.input("dy", gr.dy, N, C) // (B*T, C)
		}
		wrt, counts := n.paramNodes()
		if x != nil {
			wrt = append(wrt, x)
		}
		gs, err := Backward(G.Nodes{gr.out}, G.Nodes{dy}, wrt)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", u.Seg, err)
		}
		k := 0
		for i, c := range counts {
			if c == 0 {
				continue
			}
			gr.names = append(gr.names, u.params.Names()[i])
			gr.grads = append(gr.grads, gs[k:k+c])
			retain = append(retain, gs[k:k+c]...)
			k += c
		}
		if x != nil {
			gr.dx = gs[k]
			retain = append(retain, gr.dx)
		}
	}
	exec, err := newExecutor(g, retain, o)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", u.Seg, err)
	}
	gr.exec = exec
	return gr, nil
}

// SetTokens loads a batch: the embedding reads idx, the head targets,
// each (B, T) row-major (the other units ignore them).
func (u *Unit) SetTokens(idx, targets []int32) error {
	for _, gr := range []*unitGraph{u.fwd, u.train} {
		for _, c := range []struct {
			dst []int
			src []int32
		}{{gr.idx, idx}, {gr.tgt, targets}} {
			if c.dst == nil {
				continue
			}
			if len(c.src) != len(c.dst) {
				return fmt.Errorf("%w: %v: %d tokens, want B*T = %d", ErrTokens, u.Seg, len(c.src), len(c.dst))
			}
			for i, v := range c.src {
				if v < 0 || int(v) >= u.cfg.Vocab {
					return fmt.Errorf("%w: %v: token %d outside the vocabulary [0, %d)", ErrTokens, u.Seg, v, u.cfg.Vocab)
				}
				c.dst[i] = int(v)
			}
		}
	}
	return nil
}

// SetDropout keys the dropout masks of the next runs, as a Model's
// SetDropoutSeed and SetDropoutKey do; forward and backward draw the same.
func (u *Unit) SetDropout(seed, step int64) { u.dropKey = ops.DropoutKey{Seed: seed, Step: step} }

// run loads x (and dy) and runs one program.
func (u *Unit) run(gr *unitGraph, x, dy []float32) error {
	for _, c := range []struct{ dst, src []float32 }{{gr.x, x}, {gr.dy, dy}} {
		if c.dst == nil {
			continue
		}
		if len(c.src) != len(c.dst) {
			return fmt.Errorf("%w: %v: input of %d values, want (B*T, C) = %d", ErrTokens, u.Seg, len(c.src), len(c.dst))
		}
		copy(c.dst, c.src)
	}
	if err := gr.exec.run(); err != nil {
		return fmt.Errorf("%v: %w", u.Seg, err)
	}
	return nil
}

// Forward runs the segment on x (B*T, C) (nil for the embedding, which
// reads the tokens) and returns its output: the next residual stream, or
// for the head the loss as one value. The slice belongs to the unit.
func (u *Unit) Forward(x []float32) ([]float32, error) {
	if err := u.run(u.fwd, x, nil); err != nil {
		return nil, err
	}
	return f32Of(u.fwd.exec.value(u.fwd.out)), nil
}

// Backward recomputes the segment's forward from x and propagates dy, the
// gradient of the loss with respect to the segment's output (ignored by
// the head, whose output is the loss), back through it. It returns the
// gradient with respect to x (nil for the embedding); Grad reads the
// parameters' gradients. The slices belong to the unit.
func (u *Unit) Backward(x, dy []float32) ([]float32, error) {
	if err := u.run(u.train, x, dy); err != nil {
		return nil, err
	}
	if u.train.dx == nil {
		return nil, nil
	}
	return f32Of(u.train.exec.value(u.train.dx)), nil
}

// Params names the parameters the segment reads, in Params order.
func (u *Unit) Params() []string { return u.train.names }

// Grad is the gradient of the named parameter after the last Backward, in
// the parameter's layout (c_attn's row blocks joined into dst); nil for a
// parameter the segment does not read. dst must hold the parameter.
func (u *Unit) Grad(name string, dst []float32) []float32 {
	for i, n := range u.train.names {
		if n != name {
			continue
		}
		off := 0
		for _, g := range u.train.grads[i] {
			off += copy(dst[off:], f32Of(u.train.exec.value(g)))
		}
		return dst[:off]
	}
	return nil
}

// Close releases the unit's programs.
func (u *Unit) Close() error { return errors.Join(u.fwd.exec.close(), u.train.exec.close()) }
