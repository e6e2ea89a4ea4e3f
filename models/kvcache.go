package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
)

// KVCache holds the attention keys and values of every layer for B
// sequences of up to Block tokens each, so that a token is decoded by
// attending to the tokens before it instead of running them all again.
// Row b holds Len(b) tokens at positions 0 … Len(b)-1 of its window. Per
// layer, K and V are (B*H, Block, hs), so the keys of one head are
// contiguous and the first n of them one matrix.
//
// The cache belongs to the caller (like the parameters it lives outside
// any arena); a graph built with it appends the keys and values of its T
// tokens at each row's length and attends over everything held, and the
// caller advances the lengths after the run (Advance).
type KVCache struct {
	cfg    Config
	B      int
	layers []ops.KV // per layer: K and V (B*H, Block, hs), sharing lens
	lens   []int    // tokens held per row
}

// NewKVCache makes an empty cache for B sequences of cfg's shape.
func NewKVCache(cfg Config, B int) (*KVCache, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if B < 1 {
		return nil, fmt.Errorf("%w: KV cache for %d sequences, want >= 1", ErrConfig, B)
	}
	c := &KVCache{cfg: cfg, B: B, lens: make([]int, B)}
	n := B * cfg.Block * cfg.Embd // (B*H, Block, hs)
	for l := range cfg.Layers {
		c.layers = append(c.layers, ops.KV{B: B, H: cfg.Heads, Block: cfg.Block, HeadSize: cfg.HeadSize(),
			K: make([]float32, n), V: make([]float32, n), Lens: c.lens, Layer: l})
	}
	return c, nil
}

// Len is the number of tokens row b holds.
func (c *KVCache) Len(b int) int { return c.lens[b] }

// Reset empties every row (the storage is kept).
func (c *KVCache) Reset() { clear(c.lens) }

// Advance records that the last run appended t tokens to every row.
func (c *KVCache) Advance(t int) error {
	for b, n := range c.lens {
		if n+t > c.cfg.Block {
			return fmt.Errorf("%w: KV cache row %d holds %d tokens, %d more exceed the block of %d", ErrTokens, b, n, t, c.cfg.Block)
		}
	}
	for b := range c.lens {
		c.lens[b] += t
	}
	return nil
}

// Bytes is the storage the cache holds: keys and values of every layer.
func (c *KVCache) Bytes() int64 { return int64(2*len(c.layers)*len(c.layers[0].K)) * 4 }

// CachedAttention appends the keys k and values v of T new tokens of
// every sequence (B*H, T, hs) to layer l of the cache and returns the
// attention of the queries q (B*H, T, hs) over all the tokens the cache
// then holds: query t of row b, at position Len(b)+t, sees keys 0 …
// Len(b)+t, with softmax(q·kᵀ/√hs) as ops.CausalSoftmax computes it
// (ops.CachedAttention). It is forward-only (a decoder runs no backward).
func CachedAttention(q, k, v *G.Node, cache *KVCache, layer int) (*G.Node, error) {
	if layer < 0 || layer >= len(cache.layers) {
		return nil, fmt.Errorf("%w: layer %d of a %d-layer KV cache", ErrConfig, layer, len(cache.layers))
	}
	return ops.CachedAttention(q, k, v, &cache.layers[layer])
}
