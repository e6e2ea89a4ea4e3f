package models

import (
	"errors"
	"fmt"

	G "gorgonia.org/gorgonia"
)

// Decoder runs the GPT forward on B sequences against a KV cache: Append
// feeds T new tokens of every sequence at once (a prefill when the cache
// is empty; one token is a decode step) and returns their logits, each
// token attending to what the cache holds and to the new tokens before it.
// The graph of each T is built from the same layer functions as the
// training model (layers.go), compiled on first use and kept, so decoding
// token after token runs one small compiled graph again and again.
//
// The cache holds one window of at most Block positions; a sequence that
// outgrows it cannot slide (every position's keys depend on its absolute
// position embedding): Reset and prefill the new window.
type Decoder struct {
	cfg    Config
	p      *Params
	B      int
	cache  *KVCache
	opts   []ModelOption
	graphs map[int]*decodeGraph // by T

	// Prefills and Decodes count the Append calls on an empty cache and
	// those of one token per sequence onto a non-empty one.
	Prefills, Decodes int
}

// decodeGraph is the compiled forward of T tokens per sequence.
type decodeGraph struct {
	exec     executor
	idx, pos []int // (B*T) inputs
	logits   *G.Node
}

// NewDecoder makes a decoder of B sequences for the parameters p with an
// empty cache. opts choose the executor as for NewModel.
func NewDecoder(p *Params, B int, opts ...ModelOption) (*Decoder, error) {
	cfg := p.Config()
	cache, err := NewKVCache(cfg, B)
	if err != nil {
		return nil, err
	}
	return &Decoder{cfg: cfg, p: p, B: B, cache: cache, opts: opts, graphs: map[int]*decodeGraph{}}, nil
}

// Len is the number of tokens the cache holds for every sequence.
func (d *Decoder) Len() int { return d.cache.Len(0) }

// Reset empties the cache: the next Append is a prefill at position 0.
func (d *Decoder) Reset() { d.cache.Reset() }

// Append runs tokens (B, T), row-major, at positions Len() … Len()+T-1
// and returns their logits (B, T, V); the slice belongs to the decoder
// and changes at the next call. Len()+T must not exceed the block.
func (d *Decoder) Append(tokens []int32) ([]float32, error) {
	if len(tokens) == 0 || len(tokens)%d.B != 0 {
		return nil, fmt.Errorf("%w: %d tokens for %d sequences", ErrTokens, len(tokens), d.B)
	}
	T, start := len(tokens)/d.B, d.Len()
	if start+T > d.cfg.Block {
		return nil, fmt.Errorf("%w: %d tokens after %d exceed the block of %d (Reset and prefill the window)", ErrTokens, T, start, d.cfg.Block)
	}
	gr, err := d.graph(T)
	if err != nil {
		return nil, err
	}
	for i, v := range tokens {
		if v < 0 || int(v) >= d.cfg.Vocab {
			return nil, fmt.Errorf("%w: token %d at %d outside the vocabulary [0, %d)", ErrTokens, v, i, d.cfg.Vocab)
		}
		gr.idx[i] = int(v)
		gr.pos[i] = start + i%T
	}
	if err := gr.exec.run(); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if err := d.cache.Advance(T); err != nil {
		return nil, err
	}
	switch {
	case start == 0:
		d.Prefills++
	case T == 1:
		d.Decodes++
	}
	return f32Of(gr.exec.value(gr.logits)), nil
}

// graph returns the compiled forward of T tokens per sequence.
func (d *Decoder) graph(T int) (*decodeGraph, error) {
	if gr, ok := d.graphs[T]; ok {
		return gr, nil
	}
	if err := checkShape(d.cfg, d.p, d.B, T); err != nil {
		return nil, err
	}
	o := modelOptions{arena: defaultArena()}
	for _, opt := range d.opts {
		opt(&o)
	}
	hooks, err := o.int8Hooks(d.p, nil, false)
	if err != nil {
		return nil, err
	}
	g := G.NewGraph()
	n := newBuilder(g, d.cfg, d.p, d.B, T, false, d.cache, hooks...)
	N := d.B * T
	gr := &decodeGraph{idx: make([]int, N), pos: make([]int, N)}
	x := n.embed(n.input("idx", gr.idx, N), n.input("pos", gr.pos, N)) // (B*T, C)
	for l := range d.cfg.Layers {
		x = n.block(x, l) // (B*T, C)
	}
	gr.logits = n.head(x) // (B*T, V)
	if n.err != nil {
		return nil, fmt.Errorf("build decoder graph: %w", n.err)
	}
	exec, err := newExecutor(g, G.Nodes{gr.logits}, o)
	if err != nil {
		return nil, err
	}
	gr.exec = exec
	d.graphs[T] = gr
	return gr, nil
}

// Close releases the compiled graphs.
func (d *Decoder) Close() error {
	var err error
	for _, gr := range d.graphs {
		err = errors.Join(err, gr.exec.close())
	}
	return err
}
