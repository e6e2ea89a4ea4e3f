package models

import (
	"fmt"
	"math/rand/v2"
)

// Batcher draws training windows from a token sequence: B random offsets,
// inputs data[i:i+T] and targets data[i+1:i+T+1]. Its random stream is a
// PCG seeded from the run's seed, and its state can be saved and restored,
// so a resumed run draws exactly the batches an uninterrupted one would.
type Batcher struct {
	data []int32
	B, T int
	pcg  *rand.PCG
	rng  *rand.Rand
}

// NewBatcher returns a batcher over data for batches of B windows of T
// tokens. stream separates independent streams from one seed (training
// and validation use different streams).
func NewBatcher(data []int32, B, T int, seed, stream uint64) (*Batcher, error) {
	if B < 1 || T < 1 {
		return nil, fmt.Errorf("batcher: batch %d and block %d must be positive", B, T)
	}
	if len(data) < T+1 {
		return nil, fmt.Errorf("%w: %d tokens cannot hold a window of %d+1", ErrBadData, len(data), T)
	}
	pcg := rand.NewPCG(seed, stream)
	return &Batcher{data: data, B: B, T: T, pcg: pcg, rng: rand.New(pcg)}, nil
}

// Next fills idx and targets, each (B, T) row-major, with the next batch.
func (b *Batcher) Next(idx, targets []int32) {
	n := len(b.data) - b.T // offsets 0..len-T-1 all leave room for the shifted target
	for r := range b.B {
		i := b.rng.IntN(n)
		copy(idx[r*b.T:(r+1)*b.T], b.data[i:i+b.T])         // (T)
		copy(targets[r*b.T:(r+1)*b.T], b.data[i+1:i+1+b.T]) // (T)
	}
}

// Batch returns a freshly allocated batch (idx, targets), each (B*T).
func (b *Batcher) Batch() (idx, targets []int32) {
	idx, targets = make([]int32, b.B*b.T), make([]int32, b.B*b.T)
	b.Next(idx, targets)
	return idx, targets
}

// State returns the random stream's position.
func (b *Batcher) State() ([]byte, error) { return b.pcg.MarshalBinary() }

// SetState restores a position returned by State.
func (b *Batcher) SetState(state []byte) error {
	if err := b.pcg.UnmarshalBinary(state); err != nil {
		return fmt.Errorf("batcher state: %w", err)
	}
	return nil
}

// Stream ids of the batchers a Trainer makes from one seed: the training
// batches and the fixed validation batches.
const (
	StreamTrain uint64 = 0x7472616e // "tran"
	StreamVal   uint64 = 0x76616c   // "val"
)
