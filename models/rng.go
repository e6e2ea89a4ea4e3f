package models

import (
	"fmt"
	"math/rand/v2"
)

// RNG says where a training step's dropout masks come from.
type RNG int

const (
	// Stateless masks are a hash of (seed, step, layer, site, position),
	// drawn inside the kernels that apply them (ops.Dropout): no mask is
	// stored, and a recomputation draws the first pass's masks again.
	Stateless RNG = iota
	// Stateful masks are drawn one after another from a sequential
	// generator, in the order the forwards run, as torch's global
	// generator does. A recomputation stashes nothing by itself: with
	// preserve, as torch.utils.checkpoint(preserve_rng_state=True) does,
	// the generator's state is stashed when a segment first runs, restored
	// for its recomputation, and the outer stream put back afterwards, so
	// the recomputation draws the first pass's masks and the draws after
	// the backward are those of a step without checkpointing.
	Stateful
)

// Dropout sites, as in nanoGPT: after the embeddings (layer 0), on the
// attention probabilities, after the attention projection and after the
// MLP projection (one of each per layer). A Model's mask for (layer, site)
// at step s is ops.DropoutMask(mask, cfg.Dropout, seed, s, layer, site)
// over the shape given beside each site, row-major.
const (
	SiteEmbed     = 0 // transformer.drop on wte+wpe (layer 0): (B*T, C)
	SiteAttn      = 1 // attn_dropout on the softmax output: (B*H, T, T)
	SiteAttnResid = 2 // resid_dropout after attn.c_proj: (B*T, C)
	SiteMLP       = 3 // dropout after mlp.c_proj: (B*T, C)
)

// RNGOptions choose the masks' generator (WithRNG).
type RNGOptions struct {
	Kind     RNG
	Preserve bool // Stateful: stash and restore the state around recomputations
}

// WithRNG sets where a scheduled training model's dropout masks come from.
func WithRNG(o RNGOptions) ModelOption { return func(mo *modelOptions) { mo.rng = o } }

// stream is the sequential generator of the stateful masks.
type stream struct{ pcg *rand.PCG }

func newStream(seed int64) *stream {
	return &stream{pcg: rand.NewPCG(uint64(seed), 0x64726f706f7574)} // "dropout"
}

// mask fills dst with an inverted-dropout mask for p drawn from the
// stream: an element is dropped when the top 24 bits of its draw, as a
// fraction of 2^24, fall below p (the same rule as ops.DropoutMask).
func (s *stream) mask(dst []float32, p float64) {
	keep := float32(1 / (1 - p))
	thresh := uint64(p * (1 << 24))
	for i := range dst {
		if s.pcg.Uint64()>>40 < thresh {
			dst[i] = 0
		} else {
			dst[i] = keep
		}
	}
}

func (s *stream) state() []byte {
	b, _ := s.pcg.MarshalBinary()
	return b
}

func (s *stream) restore(b []byte) {
	if err := s.pcg.UnmarshalBinary(b); err != nil {
		panic(fmt.Sprintf("models: restore a generator state: %v", err))
	}
}

// fillStateful draws a scheduled step's masks from the stream, pass by
// pass in schedule order (see Stateful).
func (m *Model) fillStateful() {
	stash := map[int][]byte{} // segment -> the state before its first forward drew
	for _, rec := range m.passes {
		if rec.Backward || len(rec.masks) == 0 {
			continue
		}
		first, seen := stash[rec.Seg]
		var outer []byte
		switch {
		case !seen:
			stash[rec.Seg] = m.rng.state()
		case m.rngOpts.Preserve:
			outer = m.rng.state()
			m.rng.restore(first)
		}
		for _, mk := range rec.masks {
			m.rng.mask(mk.data, m.cfg.Dropout)
		}
		if outer != nil {
			m.rng.restore(outer)
		}
	}
}

// RNGState is the stateful generator's state after the last Step (nil for
// stateless masks): equal states mean the draws after it are the same.
func (m *Model) RNGState() []byte {
	if m.rng == nil {
		return nil
	}
	return m.rng.state()
}
