package models

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/planner/arena"
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
	cfg  Config
	B    int
	k, v [][]float32 // per layer: (B*H, Block, hs)
	lens []int       // tokens held per row
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
	for range cfg.Layers {
		c.k = append(c.k, make([]float32, n))
		c.v = append(c.v, make([]float32, n))
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
func (c *KVCache) Bytes() int64 { return int64(2*len(c.k)*len(c.k[0])) * 4 }

// CachedAttention appends the keys k and values v of T new tokens of
// every sequence (B*H, T, hs) to layer l of the cache and returns the
// attention of the queries q (B*H, T, hs) over all the tokens the cache
// then holds: query t of row b, at position Len(b)+t, sees keys 0 …
// Len(b)+t, with softmax(q·kᵀ/√hs) as CausalSoftmax computes it. It is
// forward-only (a decoder runs no backward).
func CachedAttention(q, k, v *G.Node, cache *KVCache, layer int) (*G.Node, error) {
	if layer < 0 || layer >= len(cache.k) {
		return nil, fmt.Errorf("%w: layer %d of a %d-layer KV cache", ErrConfig, layer, len(cache.k))
	}
	return G.ApplyOp(cachedAttnOp{cache: cache, layer: layer}, q, k, v)
}

type cachedAttnOp struct {
	opBase
	cache *KVCache
	layer int
}

func (op cachedAttnOp) Arity() int { return 3 }
func (op cachedAttnOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a), tt(3, a))
}

func (op cachedAttnOp) check(in []tensor.Shape) (tensor.Shape, error) {
	c := op.cache
	hs := c.cfg.HeadSize()
	want := tensor.Shape{c.B * c.cfg.Heads, 0, hs}
	for _, s := range in {
		if s.Dims() != 3 || s[0] != want[0] || s[2] != hs || !s.Eq(in[0]) || s[1] > c.cfg.Block {
			return nil, fmt.Errorf("%v: q, k, v %v, %v, %v: want three (%d, T, %d) with T <= %d", op, in[0], in[1], in[2], want[0], hs, c.cfg.Block)
		}
	}
	return in[0].Clone(), nil
}

func (op cachedAttnOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}

func (op cachedAttnOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}

func (op cachedAttnOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runFloat32(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op cachedAttnOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op cachedAttnOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBind(op, out, in); err != nil {
		return nil, err
	}
	s := out.Shape
	c := op.cache
	H, Tmax, hs, T := c.cfg.Heads, c.cfg.Block, c.cfg.HeadSize(), s[1]
	q, k, v, y := in[0].F32, in[1].F32, in[2].F32, out.F32
	K, V := c.k[op.layer], c.v[op.layer]
	scores := make([]float32, s[0]*T*Tmax) // each head's (T, n) scores, n <= Tmax
	sc := float32(1 / math.Sqrt(float64(hs)))
	impl := tensor.WhichBLAS()
	return par.New(s[0], T*Tmax*hs, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			pos := c.lens[bh/H]
			n := pos + T
			if n > Tmax {
				panic(fmt.Sprintf("%v: row %d holds %d tokens, %d more exceed the block of %d", op, bh/H, pos, T, Tmax))
			}
			kh, vh := K[bh*Tmax*hs:(bh+1)*Tmax*hs], V[bh*Tmax*hs:(bh+1)*Tmax*hs] // (Tmax, hs)
			copy(kh[pos*hs:n*hs], k[bh*T*hs:(bh+1)*T*hs])
			copy(vh[pos*hs:n*hs], v[bh*T*hs:(bh+1)*T*hs])
			st := scores[bh*T*Tmax : bh*T*Tmax+T*n] // (T, n)
			qh, yh := q[bh*T*hs:(bh+1)*T*hs], y[bh*T*hs:(bh+1)*T*hs]
			impl.Sgemm(blas.NoTrans, blas.Trans, T, n, hs, 1, qh, hs, kh[:n*hs], hs, 0, st, n) // (T, n) = q·kᵀ
			for t := range T {
				softmaxPrefix32(st[t*n:(t+1)*n], st[t*n:(t+1)*n], pos+t+1, sc)
			}
			impl.Sgemm(blas.NoTrans, blas.NoTrans, T, hs, n, 1, st, n, vh[:n*hs], hs, 0, yh, hs) // (T, hs) = att·v
		}
	}).Run, nil
}

func (op cachedAttnOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op cachedAttnOp) Hashcode() uint32      { return hashOf(op) }
func (op cachedAttnOp) String() string {
	return fmt.Sprintf("CachedAttention{layer %d, %p}", op.layer, op.cache)
}
