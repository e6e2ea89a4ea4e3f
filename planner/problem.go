package planner

import (
	"errors"
	"fmt"
)

// Problem is a set of buffers to place in one arena. Every offset must be a
// multiple of Alignment and every size is rounded up to it, so two buffers
// that are live together never share an aligned block. Alignment 1 means
// none; it must be a power of two.
type Problem struct {
	Buffers   []Buffer
	Alignment int64
}

// Plan places the buffers of a Problem: Offsets[i] is the offset of
// Buffers[i] in the arena, and Peak is the arena's size, the largest
// offset plus aligned size.
type Plan struct {
	Offsets []int64
	Peak    int64
}

// ErrInvalid marks a problem that cannot be planned (bad alignment, a
// non-positive size, an empty lifetime, a duplicate ID).
var ErrInvalid = errors.New("invalid problem")

// Validate reports the first thing wrong with p, naming it.
func (p Problem) Validate() error {
	if p.Alignment <= 0 || p.Alignment&(p.Alignment-1) != 0 {
		return fmt.Errorf("%w: alignment %d is not a power of two", ErrInvalid, p.Alignment)
	}
	seen := make(map[string]int, len(p.Buffers))
	for i, b := range p.Buffers {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if j, dup := seen[b.ID]; dup {
			return fmt.Errorf("%w: buffer %q appears twice (buffers %d and %d)", ErrInvalid, b.ID, j, i)
		}
		seen[b.ID] = i
	}
	return nil
}

// roundUp rounds x up to a multiple of align, a power of two.
func roundUp(x, align int64) int64 { return (x + align - 1) &^ (align - 1) }

// SizeOf returns the size buffer i occupies: its size rounded up to the
// alignment.
func (p Problem) SizeOf(i int) int64 { return roundUp(p.Buffers[i].Size, p.align()) }

// align is the alignment, with 0 read as 1 so a zero Problem still works
// after Validate has been skipped by an internal caller.
func (p Problem) align() int64 { return max(p.Alignment, 1) }

// Aligned returns the buffers with sizes rounded up to the alignment.
func (p Problem) Aligned() []Buffer {
	out := make([]Buffer, len(p.Buffers))
	for i, b := range p.Buffers {
		b.Size = p.SizeOf(i)
		out[i] = b
	}
	return out
}

// Naive is the arena of independent storage: the sum of aligned sizes.
func (p Problem) Naive() int64 {
	var s int64
	for i := range p.Buffers {
		s += p.SizeOf(i)
	}
	return s
}

// Bound is LowerBound of the aligned buffers: no plan has a smaller peak.
func (p Problem) Bound() int64 { return LowerBound(p.Aligned()) }

// PeakOf returns the arena size that offsets need: the largest offset plus
// aligned size (0 for no buffers).
func (p Problem) PeakOf(offsets []int64) int64 {
	var peak int64
	for i, off := range offsets {
		peak = max(peak, off+p.SizeOf(i))
	}
	return peak
}

// Slots counts the distinct offsets of a plan: the number of separate
// allocations a plan makes when buffers at one offset share a slot.
func (pl Plan) Slots() int {
	seen := make(map[int64]struct{}, len(pl.Offsets))
	for _, o := range pl.Offsets {
		seen[o] = struct{}{}
	}
	return len(seen)
}
