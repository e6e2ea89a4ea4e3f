package planner

import (
	"cmp"
	"slices"
)

// LowerBound returns the most bytes live at one instant: the largest total
// size of buffers whose half-open lifetimes all contain a common step. No
// placement can use less, since buffers live together need disjoint bytes.
// A sweep over sorted starts and ends, O(n log n); at equal times ends go
// first, because a buffer ending at t is dead at t.
func LowerBound(buffers []Buffer) int64 {
	type event struct{ t, size int64 }
	starts := make([]event, len(buffers))
	ends := make([]event, len(buffers))
	for i, b := range buffers {
		starts[i], ends[i] = event{b.Start, b.Size}, event{b.End, b.Size}
	}
	byTime := func(a, b event) int { return cmp.Compare(a.t, b.t) }
	slices.SortFunc(starts, byTime)
	slices.SortFunc(ends, byTime)
	var live, peak int64
	j := 0
	for _, s := range starts {
		for j < len(ends) && ends[j].t <= s.t {
			live -= ends[j].size
			j++
		}
		live += s.size
		peak = max(peak, live)
	}
	return peak
}
