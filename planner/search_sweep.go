package planner

import "sort"

// This file holds the preprocessing of the "search" planner: a sweep over
// the lifetimes that cuts time into sections (the instants at which a
// maximal set of buffers is live together), records which buffers overlap
// which, and splits the problem into independent partitions. The idea
// follows MiniMalloc (Moffitt, ASPLOS'23); the code is written afresh.

// searchSweep is the time structure of one problem, indexed by buffer number.
type searchSweep struct {
	n        int
	size     []int64      // sizes, rounded up to the alignment
	start    []int64      // lifetimes [start, end)
	end      []int64      //
	secLo    []int32      // buffer i lives in sections [secLo[i], secHi[i])
	secHi    []int32      //
	sections [][]int32    // the buffers live in each section
	overlaps [][]int32    // the buffers whose lifetime meets buffer i's, by secLo
	parts    []searchPart // independent groups of buffers, in time order
}

// searchPart is a group of buffers whose sections form the range [lo, hi) and
// which share no instant with any buffer outside the group.
type searchPart struct {
	bufs   []int32
	lo, hi int32
}

// newSearchSweep builds the sections, overlaps and partitions of buffers
// whose sizes are already aligned. A section is recorded each time a
// buffer dies after at least one buffer was born since the last section,
// so every section is a maximal set of simultaneously live buffers and
// every buffer lies in at least one section.
func newSearchSweep(start, end, size []int64) *searchSweep {
	n := len(size)
	sw := &searchSweep{n: n, size: size, start: start, end: end,
		secLo: make([]int32, n), secHi: make([]int32, n), overlaps: make([][]int32, n)}
	type event struct {
		t    int64
		born bool
		i    int32
	}
	ev := make([]event, 0, 2*n)
	for i := range n {
		ev = append(ev, event{start[i], true, int32(i)}, event{end[i], false, int32(i)})
	}
	// Deaths before births at the same instant: lifetimes are half-open.
	sort.Slice(ev, func(a, b int) bool {
		if ev[a].t != ev[b].t {
			return ev[a].t < ev[b].t
		}
		if ev[a].born != ev[b].born {
			return !ev[a].born
		}
		return ev[a].i < ev[b].i
	})
	pos := make([]int, n) // index of i in liveList
	var liveList []int32
	dirty := false
	partStart := int32(0)
	var cur []int32
	for _, e := range ev {
		if e.born {
			if len(liveList) == 0 {
				cur = nil
				partStart = int32(len(sw.sections))
			}
			for _, j := range liveList {
				sw.overlaps[e.i] = append(sw.overlaps[e.i], j)
				sw.overlaps[j] = append(sw.overlaps[j], e.i)
			}
			pos[e.i] = len(liveList)
			liveList = append(liveList, e.i)
			cur = append(cur, e.i)
			sw.secLo[e.i] = int32(len(sw.sections))
			dirty = true
			continue
		}
		if dirty {
			sec := append([]int32(nil), liveList...)
			sort.Slice(sec, func(a, b int) bool { return sec[a] < sec[b] })
			sw.sections = append(sw.sections, sec)
			dirty = false
		}
		sw.secHi[e.i] = int32(len(sw.sections))
		// Remove e.i from liveList by swapping in the last element.
		k := pos[e.i]
		last := liveList[len(liveList)-1]
		liveList[k] = last
		pos[last] = k
		liveList = liveList[:len(liveList)-1]
		if len(liveList) == 0 {
			sw.parts = append(sw.parts, searchPart{bufs: cur, lo: partStart, hi: int32(len(sw.sections))})
		}
	}
	// Overlaps by first section, then number: the search merges their
	// section ranges in one pass.
	for i := range sw.overlaps {
		o := sw.overlaps[i]
		sort.Slice(o, func(a, b int) bool {
			if sw.secLo[o[a]] != sw.secLo[o[b]] {
				return sw.secLo[o[a]] < sw.secLo[o[b]]
			}
			return o[a] < o[b]
		})
	}
	return sw
}

// sweepCost returns what newSearchSweep would store, without storing it:
// the pairs of overlapping buffers and the cells of all sections (the sum
// of their sizes). Both grow as n² when many buffers live at once.
func sweepCost(start, end []int64) (pairs, cells int64) {
	type event struct {
		t    int64
		born bool
	}
	ev := make([]event, 0, 2*len(start))
	for i := range start {
		ev = append(ev, event{start[i], true}, event{end[i], false})
	}
	sort.Slice(ev, func(a, b int) bool {
		if ev[a].t != ev[b].t {
			return ev[a].t < ev[b].t
		}
		return !ev[a].born && ev[b].born
	})
	live, dirty := int64(0), false
	for _, e := range ev {
		if e.born {
			pairs += live
			live++
			dirty = true
			continue
		}
		if dirty {
			cells += live
			dirty = false
		}
		live--
	}
	return pairs, cells
}

// cuts returns, for each boundary s|s+1 between adjacent sections, how
// many buffers live in both sections s and s+1.
func (sw *searchSweep) cuts() []int32 {
	c := make([]int32, max(len(sw.sections)-1, 0))
	for i := range sw.n {
		for s := sw.secLo[i]; s+1 < sw.secHi[i]; s++ {
			c[s]++
		}
	}
	return c
}
