package serving

import (
	"errors"
	"fmt"
)

// ErrInvariant marks a broken invariant of the block manager or a scheduler.
var ErrInvariant = errors.New("invariant broken")

func broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}

// Check verifies the block manager against the sequences that may hold
// blocks (every sequence not ended; waiting ones must hold none):
//   - every block's reference count equals the tables that list it, and no
//     table lists a block twice or a block that is free;
//   - a block two tables list is full, hashed and never written again;
//   - the prefix cache maps each hash to the one cached block with it, its
//     blocks are full, and the evictable list holds exactly the cached
//     blocks nobody maps;
//   - free, evictable and used blocks partition the device budget, and the
//     used and written-slot counters agree with the blocks;
//   - each table is as long as its computed tokens need, and the slots it
//     points at hold the sequence's own tokens.
//
// With no sequences given, every block must be free or cached: nothing leaks.
func (m *Blocks) Check(seqs []*Seq) error {
	size := m.cfg.Size
	if len(m.checkRefs) != len(m.meta) {
		m.checkRefs, m.checkLister, m.checkSeen = make([]int32, len(m.meta)), make([]int, len(m.meta)), make([]bool, len(m.meta))
	}
	refs, lister, seen := m.checkRefs, m.checkLister, m.checkSeen // lister: 1 + the last sequence listing the block
	clear(refs)
	clear(lister)
	clear(seen)
	for si, s := range seqs {
		if s.State.Ended() {
			return broken("request %d is %s but still listed", s.Req.ID, s.State)
		}
		if s.State == Waiting && (len(s.Table) > 0 || s.Computed != 0) {
			return broken("waiting request %d holds %d blocks, %d computed", s.Req.ID, len(s.Table), s.Computed)
		}
		if want := m.For(s.Computed); len(s.Table) != want {
			return broken("request %d: table of %d blocks for %d computed tokens, want %d", s.Req.ID, len(s.Table), s.Computed, want)
		}
		if s.Computed > s.Len() {
			return broken("request %d: %d tokens computed of %d known", s.Req.ID, s.Computed, s.Len())
		}
		for j, id := range s.Table {
			if id < 0 || int(id) >= len(m.meta) {
				return broken("request %d: table entry %d is block %d, outside the budget", s.Req.ID, j, id)
			}
			if s.State == Running && m.onHost(id) {
				return broken("running request %d maps host block %d", s.Req.ID, id)
			}
			if lister[id] == si+1 {
				return broken("request %d lists block %d twice", s.Req.ID, id)
			}
			lister[id] = si + 1
			refs[id]++
			b := &m.meta[id]
			if b.ref <= 0 {
				return broken("request %d maps block %d, which is free", s.Req.ID, id)
			}
			valid := min(size, s.Computed-j*size) // slots of this block s has computed
			if b.ref > 1 && !(b.hashed && int(b.filled) == size) {
				return broken("block %d is shared by %d tables but not full and sealed (filled %d)", id, b.ref, b.filled)
			}
			if int(b.filled) < valid || (b.ref == 1 && !b.hashed && int(b.filled) != valid) {
				return broken("request %d: block %d holds %d slots, %d computed in it", s.Req.ID, id, b.filled, valid)
			}
			for t := 0; t < valid; t++ {
				if got, want := m.tok[int(id)*size+t], s.Token(j*size+t); got != want {
					return broken("request %d: token %d is %d in block %d, want %d", s.Req.ID, j*size+t, got, id, want)
				}
			}
		}
	}
	used, filled, hostUsed, cached := 0, 0, 0, 0
	for i := range m.meta {
		b := &m.meta[i]
		id := BlockID(i)
		if b.ref != refs[i] {
			return broken("block %d has %d references, %d tables list it", i, b.ref, refs[i])
		}
		if b.cached {
			cached++
			if entry, ok := m.cache[b.hash]; m.onHost(id) || !b.hashed || int(b.filled) != size || !ok || entry != id {
				return broken("cached block %d: host %v, hashed %v, filled %d, cache entry %d (present %v)", i, m.onHost(id), b.hashed, b.filled, entry, ok)
			}
		}
		if b.ref > 0 {
			if m.onHost(id) {
				hostUsed++
			} else {
				used++
				filled += int(b.filled)
			}
		}
	}
	// Every cached block is its hash's entry; as many entries as cached
	// blocks means the cache names no other block.
	if cached != len(m.cache) {
		return broken("%d cached blocks, %d cache entries", cached, len(m.cache))
	}
	if used != m.used || filled != m.usedFilled || hostUsed != m.hostUsed {
		return broken("counters: used %d (counted %d), written slots %d (counted %d), host %d (counted %d)", m.used, used, m.usedFilled, filled, m.hostUsed, hostUsed)
	}
	for _, id := range m.free {
		if seen[id] || m.onHost(id) || m.meta[id].ref != 0 || m.meta[id].cached {
			return broken("free list: block %d (ref %d, cached %v, listed before %v)", id, m.meta[id].ref, m.meta[id].cached, seen[id])
		}
		seen[id] = true
	}
	n := 0
	for id := m.lruHead; id != NoBlock; id = m.meta[id].lruNext {
		if seen[id] || m.meta[id].ref != 0 || !m.meta[id].cached || n > len(m.meta) {
			return broken("evictable list: block %d (ref %d, cached %v)", id, m.meta[id].ref, m.meta[id].cached)
		}
		seen[id] = true
		n++
	}
	if n != m.evictable {
		return broken("evictable list of %d blocks, counter says %d", n, m.evictable)
	}
	if len(m.free)+m.evictable+m.used != m.cfg.Device {
		return broken("free %d + evictable %d + used %d blocks ≠ budget %d", len(m.free), m.evictable, m.used, m.cfg.Device)
	}
	for _, id := range m.hostFree {
		if seen[id] || !m.onHost(id) || m.meta[id].ref != 0 {
			return broken("host free list: block %d (ref %d)", id, m.meta[id].ref)
		}
		seen[id] = true
	}
	if len(m.hostFree)+m.hostUsed != m.cfg.Host {
		return broken("host free %d + used %d blocks ≠ budget %d", len(m.hostFree), m.hostUsed, m.cfg.Host)
	}
	listed := 0
	for key, head := range m.partial {
		for id := head; id != NoBlock; id = m.meta[id].sibNext {
			if !m.meta[id].cached || m.sibKey(id) != key || listed > len(m.meta) {
				return broken("partial-match list %x: block %d (cached %v)", key, id, m.meta[id].cached)
			}
			listed++
		}
	}
	if listed != len(m.cache) {
		return broken("partial-match lists hold %d blocks, the cache %d", listed, len(m.cache))
	}
	if len(seqs) == 0 && (m.used != 0 || m.hostUsed != 0) {
		return broken("no request holds blocks, yet %d device and %d host blocks are in use", m.used, m.hostUsed)
	}
	return nil
}
