package planner

import (
	"context"
	"math"
	"slices"
	"sort"
	"testing"
)

// naiveBestFit is the reference for placeBestFit: the same rule with a
// plain list of slots scanned in full for every buffer, O(n²).
func naiveBestFit(p Problem) []int64 {
	n := len(p.Buffers)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p.Buffers[order[a]].Start < p.Buffers[order[b]].Start })
	type slot struct {
		off, size, busyUntil int64
	}
	var slots []slot
	offs := make([]int64, n)
	var top int64
	for _, i := range order {
		b, need := p.Buffers[i], p.SizeOf(i)
		best := -1
		for k, s := range slots {
			if s.busyUntil <= b.Start && s.size >= need &&
				(best < 0 || s.size < slots[best].size || s.size == slots[best].size && s.off < slots[best].off) {
				best = k
			}
		}
		if best < 0 {
			slots = append(slots, slot{off: top, size: need})
			best, top = len(slots)-1, top+need
		}
		slots[best].busyUntil = b.End
		offs[i] = slots[best].off
	}
	return offs
}

// naiveGreedyBySize is the reference for placeGreedyBySize: every placed
// buffer is checked for overlap in time, O(n²).
func naiveGreedyBySize(p Problem) []int64 {
	n := len(p.Buffers)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := p.Buffers[order[a]], p.Buffers[order[b]]
		if p.SizeOf(order[a]) != p.SizeOf(order[b]) {
			return p.SizeOf(order[a]) > p.SizeOf(order[b])
		}
		return x.Start < y.Start
	})
	offs := make([]int64, n)
	var placed []int
	for _, i := range order {
		var hits []int
		for _, j := range placed {
			if p.Buffers[i].Overlaps(p.Buffers[j]) {
				hits = append(hits, j)
			}
		}
		slices.SortStableFunc(hits, func(x, y int) int {
			if offs[x] != offs[y] {
				return int(offs[x] - offs[y])
			}
			return x - y
		})
		best, bestGap, prevEnd := int64(-1), int64(math.MaxInt64), int64(0)
		for _, j := range hits {
			if gap := offs[j] - prevEnd; gap >= p.SizeOf(i) && gap < bestGap {
				best, bestGap = prevEnd, gap
			}
			prevEnd = max(prevEnd, offs[j]+p.SizeOf(j))
		}
		if best < 0 {
			best = prevEnd
		}
		offs[i] = best
		placed = append(placed, i)
	}
	return offs
}

// TestAgainstNaiveReferences: the fast planners place every buffer exactly
// where the plain O(n²) versions of the same rules do.
func TestAgainstNaiveReferences(t *testing.T) {
	for seed := range uint64(60) {
		spec := RandomSpec{N: 1 + int(seed)*7, Horizon: 1 + int64(seed%5)*10, MaxLife: 1 + int64(seed%7)*3, MinSize: 1, MaxSize: 1 + int64(seed%3)*200}
		p := Problem{Buffers: Random(seed, spec), Alignment: 1 << (seed % 3)}
		bf, _ := placeBestFit(context.Background(), p)
		if want := naiveBestFit(p); !slices.Equal(bf.Offsets, want) {
			t.Fatalf("seed %d: best-fit offsets %v, reference %v", seed, bf.Offsets, want)
		}
		g, _ := placeGreedyBySize(context.Background(), p)
		if want := naiveGreedyBySize(p); !slices.Equal(g.Offsets, want) {
			t.Fatalf("seed %d: greedy-by-size offsets %v, reference %v", seed, g.Offsets, want)
		}
	}
}
