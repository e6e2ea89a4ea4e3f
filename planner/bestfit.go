package planner

import (
	"context"
	"slices"
)

var bestFitAlgorithm = Algorithm{
	Name:  "best-fit",
	Short: "the chapter's free list: in order of first write, the smallest freed whole slot that fits, else a new slot",
	Place: placeBestFit,
}

// placeBestFit is the chapter's best-fit free list over whole slots.
// Buffers are taken in order of first write (Start, then index). Before
// placing a buffer that starts at t, every slot whose occupant's lifetime
// ended at or before t (its last read was strictly before t) returns to
// the free list. The buffer takes the smallest free slot whose size is at
// least its aligned size; slots are never split or merged, so a slot keeps
// the size of the buffer that created it. With no such slot, a new slot is
// cut at the end of the arena.
//
// Cost: O(n log n). Slot sizes are aligned buffer sizes, so they are known
// up front. The free list is a rank set over the distinct sizes that have
// a free slot, so "the smallest free size >= need" is one successor query,
// and a heap of free slots per size (ties go to the lowest offset).
// Releases come from a heap keyed by end.
func placeBestFit(ctx context.Context, p Problem) (Plan, error) {
	n := len(p.Buffers)
	size := make([]int64, n)
	for i := range n {
		size[i] = p.SizeOf(i)
	}
	// Ranks of the distinct aligned sizes.
	distinct := slices.Clone(size)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	rank := func(s int64) int { r, _ := slices.BinarySearch(distinct, s); return r }

	order := orderBy(n, func(i int) int64 { return p.Buffers[i].Start })

	type slot struct{ off, size int64 }
	var slots []slot
	free := newRankSet(len(distinct))        // size ranks with a free slot
	freeAt := make([]pq[int], len(distinct)) // free slots by size rank, lowest offset first
	for r := range freeAt {
		freeAt[r].less = func(a, b int) bool { return slots[a].off < slots[b].off }
	}
	type release struct {
		end  int64
		slot int
	}
	live := pq[release]{less: func(a, b release) bool {
		return a.end < b.end || a.end == b.end && a.slot < b.slot
	}}

	offs := make([]int64, n)
	var top int64
	for k, i := range order {
		if k%4096 == 0 && ctx.Err() != nil {
			return Plan{}, ctx.Err()
		}
		b := p.Buffers[i]
		for live.len() > 0 && live.top().end <= b.Start {
			id := live.pop().slot
			r := rank(slots[id].size)
			freeAt[r].push(id)
			free.add(r)
		}
		var id int
		if r := free.atOrAfter(rank(size[i])); r >= 0 {
			id = freeAt[r].pop()
			if freeAt[r].len() == 0 {
				free.remove(r)
			}
		} else {
			slots = append(slots, slot{off: top, size: size[i]})
			id = len(slots) - 1
			top += size[i]
		}
		offs[i] = slots[id].off
		live.push(release{end: b.End, slot: id})
	}
	return Plan{Offsets: offs, Peak: top}, nil
}
