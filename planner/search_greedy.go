package planner

import (
	"cmp"
	"slices"
)

// This file holds the fast start of the "search" planner: greedy placement
// under several orders, each buffer at the lowest aligned offset where it
// fits beside the already placed buffers it overlaps in time.

// greedyOrders are the orders tried; each compares buffer numbers.
var greedyOrders = []struct {
	name string
	cmp  func(sw *searchSweep, a, b int32) int
}{
	{"size", func(sw *searchSweep, a, b int32) int { return cmpDesc(sw.size[a], sw.size[b]) }},
	{"area", func(sw *searchSweep, a, b int32) int { return cmpDesc(lifeArea(sw, a), lifeArea(sw, b)) }},
	{"width", func(sw *searchSweep, a, b int32) int {
		if c := cmpDesc(sw.end[a]-sw.start[a], sw.end[b]-sw.start[b]); c != 0 {
			return c
		}
		return cmpDesc(sw.size[a], sw.size[b])
	}},
	{"start", func(sw *searchSweep, a, b int32) int {
		if sw.start[a] != sw.start[b] {
			return cmp.Compare(sw.start[a], sw.start[b])
		}
		return cmpDesc(sw.size[a], sw.size[b])
	}},
}

// lifeArea is a buffer's size times its lifetime.
func lifeArea(sw *searchSweep, b int32) int64 { return sw.size[b] * (sw.end[b] - sw.start[b]) }

// cmpDesc orders larger values first.
func cmpDesc(x, y int64) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	}
	return 0
}

// greedyBest places the buffers under every order of greedyOrders and
// returns the offsets with the lowest peak (the first order wins ties).
func greedyBest(sw *searchSweep, align int64) ([]int64, int64) {
	var best []int64
	bestPeak := int64(-1)
	for _, g := range greedyOrders {
		order := make([]int32, sw.n)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int { return g.cmp(sw, a, b) })
		off, peak := greedyPlace(sw, align, order)
		if bestPeak < 0 || peak < bestPeak {
			best, bestPeak = off, peak
		}
	}
	return best, max(bestPeak, 0)
}

// greedyPlace puts each buffer of order at the lowest aligned offset that
// clears every placed buffer it overlaps.
func greedyPlace(sw *searchSweep, align int64, order []int32) ([]int64, int64) {
	off := make([]int64, sw.n)
	for i := range off {
		off[i] = -1
	}
	type span struct{ lo, hi int64 }
	var busy []span
	peak := int64(0)
	for _, b := range order {
		busy = busy[:0]
		for _, o := range sw.overlaps[b] {
			if off[o] >= 0 {
				busy = append(busy, span{off[o], off[o] + sw.size[o]})
			}
		}
		slices.SortFunc(busy, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
		at := int64(0)
		for _, s := range busy {
			if at+sw.size[b] <= s.lo {
				break
			}
			if s.hi > at {
				at = alignUp(s.hi, align)
			}
		}
		off[b] = at
		peak = max(peak, at+sw.size[b])
	}
	return off, peak
}

// alignUp rounds x up to a multiple of align (align >= 1).
func alignUp(x, align int64) int64 {
	if r := x % align; r != 0 {
		return x + align - r
	}
	return x
}
