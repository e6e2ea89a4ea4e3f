package planner

import (
	"errors"
	"fmt"
)

// ErrBadPlan marks a plan that fails verification: two live buffers share
// bytes, an offset is misaligned or negative, or the peak is misstated.
var ErrBadPlan = errors.New("bad plan")

// Check verifies a plan in every way this package knows: the problem is
// valid, there is one offset per buffer, each offset is non-negative and
// aligned, the stated peak is what the offsets need, no two live buffers
// overlap (VerifyNoOverlap, a sweep) and the plan survives byte-pattern
// execution (Simulate). The two overlap checks share no code, so a bug in
// one does not hide a bad plan from the other.
func Check(p Problem, pl Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := checkShape(p, pl); err != nil {
		return err
	}
	for i, off := range pl.Offsets {
		if off%p.align() != 0 {
			return fmt.Errorf("%w: buffer %q at offset %d is not aligned to %d", ErrBadPlan, p.Buffers[i].ID, off, p.align())
		}
	}
	if need := p.PeakOf(pl.Offsets); need != pl.Peak {
		return fmt.Errorf("%w: plan states peak %d but its buffers reach %d", ErrBadPlan, pl.Peak, need)
	}
	if err := VerifyNoOverlap(p, pl); err != nil {
		return err
	}
	return Simulate(p, pl)
}

// checkShape reports a plan whose offsets do not match the buffers or lie
// outside [0, Peak).
func checkShape(p Problem, pl Plan) error {
	if len(pl.Offsets) != len(p.Buffers) {
		return fmt.Errorf("%w: %d offsets for %d buffers", ErrBadPlan, len(pl.Offsets), len(p.Buffers))
	}
	for i, off := range pl.Offsets {
		b := p.Buffers[i]
		if off < 0 || off > pl.Peak-b.Size {
			return fmt.Errorf("%w: buffer %q at [%d, %d) lies outside the arena [0, %d)", ErrBadPlan, b.ID, off, off+b.Size, pl.Peak)
		}
	}
	return nil
}

// VerifyNoOverlap sweeps the schedule and reports two buffers that are
// live at a common step and share a byte. Live buffers are kept in a set
// ordered by offset (a rank set over the offset ranks); the live set
// is pairwise disjoint as long as each newcomer is disjoint from its
// neighbours in offset order, because every other live buffer lies beyond
// a neighbour. At equal times ends are taken before starts: lifetimes are
// half-open. O(n log n).
func VerifyNoOverlap(p Problem, pl Plan) error {
	if err := checkShape(p, pl); err != nil {
		return err
	}
	n := len(p.Buffers)
	byOff := orderBy(n, func(i int) int64 { return pl.Offsets[i] }) // rank = position
	rank := make([]int, n)
	for r, i := range byOff {
		rank[i] = r
	}
	starts, ends := sortedByTime(p.Buffers)
	live := newRankSet(n)
	end := func(i int) int64 { return pl.Offsets[i] + p.Buffers[i].Size }
	j := 0
	for _, i := range starts {
		t := p.Buffers[i].Start
		for j < n && p.Buffers[ends[j]].End <= t {
			live.remove(rank[ends[j]])
			j++
		}
		r := rank[i]
		if q := live.atOrBefore(r - 1); q >= 0 && end(byOff[q]) > pl.Offsets[i] {
			return overlapError(p, pl, byOff[q], i, t)
		}
		if q := live.atOrAfter(r + 1); q >= 0 && end(i) > pl.Offsets[byOff[q]] {
			return overlapError(p, pl, byOff[q], i, t)
		}
		live.add(r)
	}
	return nil
}

// sortedByTime returns buffer indices sorted by start and by end (ties by
// index, so the order is deterministic).
func sortedByTime(bufs []Buffer) (starts, ends []int) {
	starts = orderBy(len(bufs), func(i int) int64 { return bufs[i].Start })
	ends = orderBy(len(bufs), func(i int) int64 { return bufs[i].End })
	return starts, ends
}

func overlapError(p Problem, pl Plan, a, b int, t int64) error {
	ba, bb := p.Buffers[a], p.Buffers[b]
	lo := max(pl.Offsets[a], pl.Offsets[b])
	hi := min(pl.Offsets[a]+ba.Size, pl.Offsets[b]+bb.Size)
	return fmt.Errorf("%w: buffers %q (bytes [%d, %d), steps [%d, %d)) and %q (bytes [%d, %d), steps [%d, %d)) are both live at step %d and share bytes [%d, %d)",
		ErrBadPlan, ba.ID, pl.Offsets[a], pl.Offsets[a]+ba.Size, ba.Start, ba.End,
		bb.ID, pl.Offsets[b], pl.Offsets[b]+bb.Size, bb.Start, bb.End, t, lo, hi)
}
