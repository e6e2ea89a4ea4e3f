package planner

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
)

// This file holds the small data structures the planners and the verifier
// share: a binary heap, a set of ranks with successor and predecessor, and
// a max-tree. All are array-based: no pointers to chase.

// pq is a binary min-heap ordered by less.
type pq[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *pq[T]) len() int { return len(h.items) }

func (h *pq[T]) top() T { return h.items[0] }

func (h *pq[T]) push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			break
		}
		h.items[i], h.items[parent] = h.items[parent], h.items[i]
		i = parent
	}
}

func (h *pq[T]) pop() T {
	x := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.less(h.items[l], h.items[m]) {
			m = l
		}
		if r < last && h.less(h.items[r], h.items[m]) {
			m = r
		}
		if m == i {
			return x
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}

// rankSet is a set of ranks 0..n-1 with successor and predecessor queries:
// a tree of 64-bit words, each bit of a word above the leaves saying
// whether the word below it has any bit set. With 64 children a node, a
// million ranks need three levels, so each operation touches at most three
// words per level change, and the leaf level (n/8 bytes) stays in cache.
type rankSet struct {
	levels [][]uint64 // levels[0] holds one bit per rank
}

func newRankSet(n int) *rankSet {
	s := &rankSet{}
	for {
		words := (n + 63) / 64
		s.levels = append(s.levels, make([]uint64, max(words, 1)))
		if words <= 1 {
			return s
		}
		n = words
	}
}

func (s *rankSet) add(r int) {
	for _, lv := range s.levels {
		lv[r/64] |= 1 << (r % 64)
		r /= 64
	}
}

func (s *rankSet) remove(r int) {
	for _, lv := range s.levels {
		lv[r/64] &^= 1 << (r % 64)
		if lv[r/64] != 0 {
			return
		}
		r /= 64
	}
}

// atOrAfter returns the smallest member >= r, or -1.
func (s *rankSet) atOrAfter(r int) int {
	r = max(r, 0)
	for l, lv := range s.levels {
		if r/64 >= len(lv) {
			return -1
		}
		if w := lv[r/64] >> (r % 64); w != 0 {
			r += bits.TrailingZeros64(w)
			for ; l > 0; l-- { // descend to the lowest member below
				r = r*64 + bits.TrailingZeros64(s.levels[l-1][r])
			}
			return r
		}
		r = r/64 + 1 // the next word at this level
	}
	return -1
}

// atOrBefore returns the largest member <= r, or -1.
func (s *rankSet) atOrBefore(r int) int {
	if r < 0 {
		return -1
	}
	r = min(r, len(s.levels[0])*64-1)
	for l, lv := range s.levels {
		if w := lv[r/64] << (63 - r%64); w != 0 {
			r -= bits.LeadingZeros64(w)
			for ; l > 0; l-- { // descend to the highest member below
				r = r*64 + 63 - bits.LeadingZeros64(s.levels[l-1][r])
			}
			return r
		}
		r = r/64 - 1 // the previous word at this level
		if r < 0 {
			return -1
		}
	}
	return -1
}

// maxTree keeps the maximum of values at positions 0..n-1 (initially
// math.MinInt64) and lists the positions below a limit whose value exceeds
// a threshold, pruning subtrees whose maximum does not.
type maxTree struct {
	size int
	max  []int64
}

func newMaxTree(n int) *maxTree {
	size := 1
	for size < n {
		size *= 2
	}
	m := make([]int64, 2*size)
	for i := range m {
		m[i] = math.MinInt64
	}
	return &maxTree{size: size, max: m}
}

func (t *maxTree) set(pos int, v int64) {
	i := pos + t.size
	t.max[i] = v
	for i /= 2; i > 0; i /= 2 {
		t.max[i] = max(t.max[2*i], t.max[2*i+1])
	}
}

// above appends to out every position < limit whose value is > v.
func (t *maxTree) above(limit int, v int64, out []int) []int {
	return t.collect(1, 0, t.size, limit, v, out)
}

func (t *maxTree) collect(node, lo, hi, limit int, v int64, out []int) []int {
	if lo >= limit || t.max[node] <= v {
		return out
	}
	if node >= t.size {
		return append(out, lo)
	}
	mid := (lo + hi) / 2
	out = t.collect(2*node, lo, mid, limit, v, out)
	return t.collect(2*node+1, mid, hi, limit, v, out)
}

// orderBy returns 0..n-1 sorted by key, ties by index. The keys are copied
// beside the indices first, so the sort compares packed pairs rather than
// chasing indices into larger records.
func orderBy(n int, key func(i int) int64) []int {
	type keyed struct {
		k int64
		i int
	}
	ks := make([]keyed, n)
	for i := range ks {
		ks[i] = keyed{key(i), i}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if a.k != b.k {
			return cmp.Compare(a.k, b.k)
		}
		return cmp.Compare(a.i, b.i)
	})
	out := make([]int, n)
	for j, x := range ks {
		out[j] = x.i
	}
	return out
}
