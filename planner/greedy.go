package planner

import (
	"cmp"
	"context"
	"math"
	"slices"
)

var greedyBySizeAlgorithm = Algorithm{
	Name:  "greedy-by-size",
	Short: "TFLite's: largest first, each in the smallest gap among the buffers it meets in time, else above them",
	Place: placeGreedyBySize,
}

// placeGreedyBySize is TFLite's greedy-by-size (the GPU delegate's
// GreedyBySizeAssignment and the arena planner's smallest-gap rule):
// buffers are taken largest first (ties by start, then index); each goes
// into the smallest gap, among the already placed buffers whose lifetimes
// overlap its own, that holds it, or on top of the highest of them.
//
// Cost: finding the placed buffers a lifetime overlaps uses a max-tree of
// ends over the buffers sorted by start, O((k+1) log n) for k overlapping
// ones, and sorting them O(k log k). On schedules where few buffers are
// live at once that is O(n log n); when everything overlaps everything
// k grows to n and the whole is O(n² log n), as in TFLite.
func placeGreedyBySize(ctx context.Context, p Problem) (Plan, error) {
	n := len(p.Buffers)
	size := make([]int64, n)
	for i := range n {
		size[i] = p.SizeOf(i)
	}
	byStart := orderBy(n, func(i int) int64 { return p.Buffers[i].Start })
	pos := make([]int, n) // pos[i]: where buffer i sits in byStart
	starts := make([]int64, n)
	for k, i := range byStart {
		pos[i] = k
		starts[k] = p.Buffers[i].Start
	}
	order := slices.Clone(byStart)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(size[b], size[a]) })

	ends := newMaxTree(n) // end of each placed buffer at its byStart position
	offs := make([]int64, n)
	var peak int64
	var hits []int
	for k, i := range order {
		if k%4096 == 0 && ctx.Err() != nil {
			return Plan{}, ctx.Err()
		}
		b := p.Buffers[i]
		// Placed buffers that overlap b: start < b.End and end > b.Start.
		limit, _ := slices.BinarySearch(starts, b.End)
		hits = ends.above(limit, b.Start, hits[:0])
		for h := range hits {
			hits[h] = byStart[hits[h]]
		}
		slices.SortFunc(hits, func(x, y int) int { return cmp.Or(cmp.Compare(offs[x], offs[y]), cmp.Compare(x, y)) })
		best, bestGap := int64(-1), int64(math.MaxInt64)
		var prevEnd int64 // offsets and sizes are aligned, so every gap start is too
		for _, j := range hits {
			if gap := offs[j] - prevEnd; gap >= size[i] && gap < bestGap {
				best, bestGap = prevEnd, gap
			}
			prevEnd = max(prevEnd, offs[j]+size[j])
		}
		if best < 0 {
			best = prevEnd
		}
		offs[i] = best
		peak = max(peak, best+size[i])
		ends.set(pos[i], b.End)
	}
	return Plan{Offsets: offs, Peak: peak}, nil
}
