package planner

import (
	"context"
	"slices"
	"sync/atomic"
)

// This file holds the decision procedure of the "search" planner: given a
// capacity, a depth-first search for offsets that fit under it. It follows
// MiniMalloc (Moffitt, "MiniMalloc: A Lightweight Memory Allocator for
// Hardware-Accelerated Machine Learning", ASPLOS'23):
//
//   - canonical solutions only: buffers are placed in non-decreasing order
//     of offset (ties by a static preorder), each at the top of the highest
//     already placed buffer it overlaps in time. Sorting any valid plan by
//     offset and letting each buffer fall as far as it can gives such a
//     solution, so nothing better is lost;
//   - dynamic ordering: at each node the candidates are the unplaced
//     buffers sorted by their lowest possible offset;
//   - dominance: a buffer is not placed at or above the top that some other
//     unplaced buffer could reach, which would leave a gap that buffer fits;
//   - section inference: in every section, the lowest offset any unplaced
//     buffer can take plus the unplaced bytes live there must fit;
//   - dynamic decomposition: once no unplaced buffer crosses a section
//     boundary, both sides are solved independently;
//   - round robin over three static preorders with a doubling node limit
//     (searcher.round, in search_parallel.go).
//
// The search state is updated in place and undone on the way back, with
// the changes logged; the work per node is linear in the unplaced buffers
// of the partition plus the sections whose floors may change.

// dfsStatus is the outcome of a (partial) search.
type dfsStatus uint8

const (
	dfsInfeasible dfsStatus = iota // the search space was exhausted: infeasible
	dfsFound                       // every buffer has an offset in sol
	dfsAborted                     // the node limit ran out
	dfsCancelled                   // the context or the stop flag ended it
)

// searchHeuristics are the static preorders tried in turn. Each letter is a
// key, compared in decreasing order: W lifetime width, A area (size times
// width), T the largest total of unplaced bytes in a section the buffer
// lives in. Ties go to the lower buffer number.
var searchHeuristics = []string{"WAT", "TAW", "TWA"}

// searchOrd is one candidate of the dynamic ordering: its lowest possible offset
// and its index in the current static preorder.
type searchOrd struct {
	off int64
	pre int32
}

// floorChange and offChange record the old values of a section floor and
// of a buffer's lowest offset, to undo a placement.
type floorChange struct {
	sec int32
	old int64
}

// secRange is a range [lo, hi) of sections.
type secRange struct{ lo, hi int32 }

type offChange struct {
	buf int32
	old int64
}

// dfs is the state of one decision search.
type dfs struct {
	sw       *searchSweep
	capacity int64
	align    int64
	heur     string
	ctx      context.Context

	off    []int64 // offset of each placed buffer, -1 while unplaced
	sol    []int64 // the offsets of the last solution found
	minOff []int64 // lowest offset each unplaced buffer can take
	floor  []int64 // per section: lowest offset an unplaced buffer there can take
	total  []int64 // per section: bytes of unplaced buffers
	// Per section, its buffers with the unplaced ones first: un[s][:nUn[s]].
	// pos[b][s-secLo[b]] is where b sits in un[s].
	un  [][]int32
	nUn []int32
	pos [][]int32
	// hint[s] is a buffer of section s that last held its floor down: a
	// guess checked first, never trusted.
	hint []int32
	cuts []int32 // per boundary: unplaced buffers crossing it

	nodes     int64       // nodes left under the current limit
	stop      atomic.Bool // set by another goroutine to end the run
	floorLog  []floorChange
	offLog    []offChange
	affected  []secRange  // section ranges whose floors may rise
	ordStack  []searchOrd // the orderings of the nodes on the current path
	raised    []searchOrd // scratch: the entries a placement raised
	cutpoints []int32
}

// newDFS returns the state of a search over sw with nothing placed.
func newDFS(ctx context.Context, sw *searchSweep, align int64) *dfs {
	d := &dfs{sw: sw, align: align, ctx: ctx,
		off: make([]int64, sw.n), sol: make([]int64, sw.n), minOff: make([]int64, sw.n),
		floor: make([]int64, len(sw.sections)), total: make([]int64, len(sw.sections)),
		cuts: sw.cuts()}
	for i := range d.off {
		d.off[i] = -1
	}
	d.un, d.nUn, d.pos = make([][]int32, len(sw.sections)), make([]int32, len(sw.sections)), make([][]int32, sw.n)
	for b := range sw.n {
		d.pos[b] = make([]int32, sw.secHi[b]-sw.secLo[b])
	}
	d.ordStack = make([]searchOrd, 0, min(sw.n*(sw.n+3)/2, 1<<16))
	d.hint = make([]int32, len(sw.sections))
	for s, sec := range sw.sections {
		d.hint[s] = sec[0]
		d.un[s] = append([]int32(nil), sec...)
		d.nUn[s] = int32(len(sec))
		for k, b := range sec {
			d.total[s] += sw.size[b]
			d.pos[b][int32(s)-sw.secLo[b]] = int32(k)
		}
	}
	return d
}

// run searches with heuristic h and at most limit nodes, and returns the
// outcome and the nodes visited. The state is restored when it returns;
// the offsets found, if any, stay in d.sol.
func (d *dfs) run(h string, limit int64) (dfsStatus, int64) {
	if d.stop.Load() {
		return dfsCancelled, 0
	}
	d.heur, d.nodes = h, limit
	st := dfsFound
	for _, p := range d.sw.parts {
		if st = d.subSolve(p); st != dfsFound {
			break
		}
	}
	return st, limit - d.nodes
}

// subSolve searches one partition from scratch with a fresh preorder.
func (d *dfs) subSolve(p searchPart) dfsStatus {
	type key struct {
		w, a, t int64
		b       int32
	}
	keys := make([]key, len(p.bufs))
	for k, b := range p.bufs {
		w := d.sw.end[b] - d.sw.start[b]
		t := int64(0)
		for s := d.sw.secLo[b]; s < d.sw.secHi[b]; s++ {
			t = max(t, d.total[s])
		}
		keys[k] = key{w: w, a: w * d.sw.size[b], t: t, b: b}
	}
	slices.SortFunc(keys, func(x, y key) int {
		for _, c := range d.heur {
			var u, v int64
			switch c {
			case 'W':
				u, v = x.w, y.w
			case 'A':
				u, v = x.a, y.a
			case 'T':
				u, v = x.t, y.t
			}
			if u != v {
				if u > v {
					return -1
				}
				return 1
			}
		}
		return int(x.b - y.b)
	})
	pre := make([]int32, len(keys))
	ordering := make([]searchOrd, len(keys))
	for k := range keys {
		pre[k] = keys[k].b
		ordering[k] = searchOrd{pre: int32(k)}
	}
	return d.search(p, pre, ordering, 0, 0)
}

// search is one node: the unplaced buffers of parent, re-sorted by their
// current lowest offsets, are tried in turn at those offsets.
func (d *dfs) search(p searchPart, pre []int32, parent []searchOrd, minOffset int64, minPre int32) dfsStatus {
	if d.nodes <= 0 {
		return dfsAborted
	}
	d.nodes--
	if d.nodes&1023 == 0 && (d.stop.Load() || d.ctx.Err() != nil) {
		return dfsCancelled
	}
	// The ordering lives on a stack shared by all nodes; children append
	// past it, and a reallocation leaves this node's slice intact. The
	// parent's order was sorted, and since then one placement raised some
	// buffers, all to the same offset: those are set aside, sorted and
	// merged back in. (A fresh partition has no such structure and is
	// sorted from scratch.)
	base := len(d.ordStack)
	defer func() { d.ordStack = d.ordStack[:base] }()
	raised, uniform := d.raised[:0], true
	minHeight := int64(-1) // the lowest top any unplaced buffer can reach
	for _, o := range parent {
		b := pre[o.pre]
		if d.off[b] >= 0 {
			continue
		}
		m := d.minOff[b]
		if h := m + d.sw.size[b]; minHeight < 0 || h < minHeight {
			minHeight = h
		}
		if m == o.off {
			d.ordStack = append(d.ordStack, searchOrd{off: m, pre: o.pre})
			continue
		}
		uniform = uniform && (len(raised) == 0 || raised[0].off == m)
		raised = append(raised, searchOrd{off: m, pre: o.pre})
	}
	d.raised = raised
	kept := len(d.ordStack) - base
	d.ordStack = append(d.ordStack, raised...)
	ordering := d.ordStack[base:]
	if len(ordering) == 0 {
		return dfsFound
	}
	if uniform {
		insertionSort(raised)
		// Merge from the back: the kept entries above the raised ones move up.
		i, j := kept-1, len(ordering)-1
		for k := len(raised) - 1; k >= 0; k-- {
			r := raised[k]
			for ; i >= 0 && ordLess(r, ordering[i]); i, j = i-1, j-1 {
				ordering[j] = ordering[i]
			}
			ordering[j] = r
			j--
		}
	} else {
		insertionSort(ordering)
	}
	// In the canonical solution a branch stands for, no later buffer goes
	// below the offset it tries, so every section's unplaced bytes must fit
	// above that offset. (After a decomposition the parts restart from
	// offset 0 and may find more, which is harmless.)
	maxTotal := int64(0)
	for s := p.lo; s < p.hi; s++ {
		maxTotal = max(maxTotal, d.total[s])
	}
	for _, o := range ordering {
		if o.off+maxTotal > d.capacity {
			break
		}
		// Canonical order: (offset, preorder) never decreases.
		if o.off < minOffset || (o.off == minOffset && o.pre < minPre) {
			continue
		}
		// Dominance: placing at or above minHeight leaves a gap below in
		// which another buffer fits; the ordering is sorted, so stop.
		if o.off >= minHeight {
			break
		}
		b := pre[o.pre]
		d.off[b], d.sol[b] = o.off, o.off
		offMark, floorMark := len(d.offLog), len(d.floorLog)
		d.raiseMinOffsets(b)
		d.updateSections(b)
		st := dfsInfeasible
		if d.feasible(floorMark) {
			st = d.decompose(p, pre, ordering, o.off, o.pre, b)
		}
		d.undo(b, offMark, floorMark)
		if st != dfsInfeasible {
			return st
		}
	}
	return dfsInfeasible
}

// raiseMinOffsets lifts the lowest offsets of the unplaced buffers that
// overlap the just-placed b to b's top, and collects the section ranges
// whose floors may rise as a result, merged and in order.
func (d *dfs) raiseMinOffsets(b int32) {
	top := alignUp(d.off[b]+d.sw.size[b], d.align)
	d.affected = d.affected[:0]
	for _, o := range d.sw.overlaps[b] {
		if d.off[o] >= 0 || d.minOff[o] >= top {
			continue
		}
		d.offLog = append(d.offLog, offChange{o, d.minOff[o]})
		d.minOff[o] = top
		d.affected = append(d.affected, secRange{d.sw.secLo[o], d.sw.secHi[o]})
	}
	// overlaps[b] is sorted by first section, so the spans are too.
	merged := d.affected[:0]
	for _, r := range d.affected {
		if k := len(merged) - 1; k >= 0 && r.lo <= merged[k].hi {
			merged[k].hi = max(merged[k].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	d.affected = merged
}

// updateSections removes b from the totals of its sections, raises their
// floors to b's top, and raises each affected section's floor to the
// lowest offset its unplaced buffers can take.
func (d *dfs) updateSections(b int32) {
	top := d.off[b] + d.sw.size[b]
	raised := alignUp(top, d.align)
	for s := d.sw.secLo[b]; s < d.sw.secHi[b]; s++ {
		d.floorLog = append(d.floorLog, floorChange{s, d.floor[s]})
		d.floor[s] = top
		d.total[s] -= d.sw.size[b]
		// Swap b to the end of the unplaced prefix of un[s] and shrink it.
		u, k, last := d.un[s], d.pos[b][s-d.sw.secLo[b]], d.nUn[s]-1
		o := u[last]
		u[k], u[last] = o, b
		d.pos[o][s-d.sw.secLo[o]], d.pos[b][s-d.sw.secLo[b]] = k, last
		d.nUn[s] = last
	}
	for _, r := range d.affected {
	sections:
		for s := r.lo; s < r.hi; s++ {
			low := int64(-1)
			f := d.floor[s]
			// The raised buffers live here, so the new floor is at most
			// raised: if that cannot break the section, skip the scan (the
			// pruning only ever asks whether floor+total exceeds the
			// capacity, and total only falls deeper in the search).
			if f >= raised || raised+d.total[s] <= d.capacity {
				continue
			}
			if w := d.hint[s]; d.off[w] < 0 && d.minOff[w] <= f {
				continue // the last witness still holds the floor down
			}
			arg := int32(-1)
			for _, o := range d.un[s][:d.nUn[s]] {
				m := d.minOff[o]
				if m <= f {
					d.hint[s] = o
					continue sections // the floor cannot rise
				}
				if low < 0 || m < low {
					low, arg = m, o
				}
			}
			if arg >= 0 {
				d.hint[s] = arg
			}
			if low > f {
				d.floorLog = append(d.floorLog, floorChange{s, f})
				d.floor[s] = low
			}
		}
	}
}

// undo reverses the placement of b.
func (d *dfs) undo(b int32, offMark, floorMark int) {
	for k := len(d.floorLog) - 1; k >= floorMark; k-- {
		c := d.floorLog[k]
		d.floor[c.sec] = c.old
	}
	d.floorLog = d.floorLog[:floorMark]
	for s := d.sw.secLo[b]; s < d.sw.secHi[b]; s++ {
		d.total[s] += d.sw.size[b]
		d.nUn[s]++ // b sits just past the prefix: undo is last in, first out
	}
	for k := len(d.offLog) - 1; k >= offMark; k-- {
		c := d.offLog[k]
		d.minOff[c.buf] = c.old
	}
	d.offLog = d.offLog[:offMark]
	d.off[b] = -1
}

// feasible is the section inference: in every section, the unplaced
// bytes must fit between the floor and the capacity. Every section met
// that before b was placed (an invariant of the search, true at the root
// because the capacity is at least the lower bound), and only the
// sections whose floor changed, all logged from floorMark on, can break it
// now. The part of the test that involves the offset (no later buffer
// goes below it) is made once per node in search.
func (d *dfs) feasible(floorMark int) bool {
	for _, c := range d.floorLog[floorMark:] {
		if d.floor[c.sec]+d.total[c.sec] > d.capacity {
			return false
		}
	}
	return true
}

// decompose continues the search after b was placed: if b was the last
// unplaced buffer across some section boundaries, the partition falls apart
// there and each side is solved on its own.
func (d *dfs) decompose(p searchPart, pre []int32, ordering []searchOrd, offset int64, preIdx int32, b int32) dfsStatus {
	mark := len(d.cutpoints)
	for s := d.sw.secLo[b]; s+1 < d.sw.secHi[b]; s++ {
		if d.cuts[s]--; d.cuts[s] == 0 {
			d.cutpoints = append(d.cutpoints, s+1)
		}
	}
	var st dfsStatus
	if len(d.cutpoints) == mark {
		st = d.search(p, pre, ordering, offset, preIdx)
	} else {
		cps := append([]int32{p.lo}, d.cutpoints[mark:]...)
		cps = append(cps, p.hi)
		d.cutpoints = d.cutpoints[:mark]
		st = dfsFound
		for k := 1; k < len(cps) && st == dfsFound; k++ {
			sub := searchPart{lo: cps[k-1], hi: cps[k]}
			for _, o := range p.bufs {
				if d.off[o] < 0 && d.sw.secLo[o] < sub.hi && sub.lo < d.sw.secHi[o] {
					sub.bufs = append(sub.bufs, o)
				}
			}
			if len(sub.bufs) > 0 {
				st = d.subSolve(sub)
			}
		}
	}
	d.cutpoints = d.cutpoints[:mark]
	for s := d.sw.secLo[b]; s+1 < d.sw.secHi[b]; s++ {
		d.cuts[s]++
	}
	return st
}

// ordLess orders candidates by lowest offset, then preorder.
func ordLess(x, y searchOrd) bool { return x.off < y.off || x.off == y.off && x.pre < y.pre }

// insertionSort sorts a nearly sorted ordering.
func insertionSort(o []searchOrd) {
	for i := 1; i < len(o); i++ {
		x, j := o[i], i
		for ; j > 0 && ordLess(x, o[j-1]); j-- {
			o[j] = o[j-1]
		}
		o[j] = x
	}
}
