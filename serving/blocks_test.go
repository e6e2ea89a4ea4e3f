package serving

import (
	"errors"
	"slices"
	"testing"
)

// seqOf makes a sequence over explicit prompt tokens.
func seqOf(id int, toks ...int32) *Seq {
	return NewSeq(&Request{ID: id, Prompt: len(toks), Output: 100, Tokens: toks})
}

// admitAll looks s up, attaches the match and computes its whole prompt.
func admitAll(t *testing.T, m *Blocks, s *Seq) (Match, []Copy) {
	t.Helper()
	var mt Match
	m.Lookup(s, &mt)
	if cost := m.AdmitCost(&mt, s.Len()-mt.Tokens); cost > m.Available() {
		t.Fatalf("request %d: admission needs %d blocks, %d available", s.Req.ID, cost, m.Available())
	}
	m.Attach(s, &mt)
	var cow []Copy
	if err := m.Reserve(s, s.Pending(), &cow); err != nil {
		t.Fatal(err)
	}
	m.Commit(s, s.Pending())
	s.State = Running
	return mt, cow
}

// decode samples one token into s and computes the previous one.
func decode(t *testing.T, m *Blocks, s *Seq, tok int32) []Copy {
	t.Helper()
	s.Out = append(s.Out, tok)
	s.Generated++
	var cow []Copy
	if err := m.Reserve(s, s.Pending(), &cow); err != nil {
		t.Fatal(err)
	}
	m.Commit(s, s.Pending())
	return cow
}

func mustCheck(t *testing.T, m *Blocks, seqs ...*Seq) {
	t.Helper()
	if err := m.Check(seqs); err != nil {
		t.Fatal(err)
	}
}

func newBlocks(t *testing.T, cfg BlockConfig) *Blocks {
	t.Helper()
	m, err := NewBlocks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBlocksOnDemand(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 8})
	s := seqOf(0, 1, 2, 3, 4, 5, 6)
	admitAll(t, m, s)
	if len(s.Table) != 2 || m.Used() != 2 || m.UsedSlots() != 6 {
		t.Fatalf("6 tokens: table %v, used %d, slots %d; want 2 blocks, 6 slots", s.Table, m.Used(), m.UsedSlots())
	}
	decode(t, m, s, 9) // a sampled token's KV is written by the decode after it
	decode(t, m, s, 10)
	if s.Computed != 8 || len(s.Table) != 2 {
		t.Fatalf("after two decodes: computed %d, table %v; want 8 in 2 blocks", s.Computed, s.Table)
	}
	decode(t, m, s, 11) // the 9th token's KV needs a third block
	if len(s.Table) != 3 {
		t.Fatalf("9 tokens of KV in %d blocks, want 3", len(s.Table))
	}
	mustCheck(t, m, s)
	m.Free(s)
	mustCheck(t, m)
	if m.Available() != 8 {
		t.Fatalf("after free: %d available, want 8", m.Available())
	}
}

func TestBlocksOutOfBlocks(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 2})
	s := seqOf(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	var cow []Copy
	if err := m.Reserve(s, 10, &cow); !errors.Is(err, ErrNoBlocks) {
		t.Fatalf("reserve 3 blocks of 2: %v, want ErrNoBlocks", err)
	}
	if len(s.Table) != 0 || m.Available() != 2 {
		t.Fatalf("a failed reservation took blocks: table %v, available %d", s.Table, m.Available())
	}
}

func TestPrefixCacheSharesFullBlocks(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 16, Caching: true})
	a := seqOf(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	admitAll(t, m, a)
	b := seqOf(1, 1, 2, 3, 4, 5, 6, 7, 8, 99, 98)
	mt, cow := admitAll(t, m, b)
	if mt.Tokens != 8 || len(mt.Full) != 2 || mt.Partial != NoBlock || len(cow) != 0 {
		t.Fatalf("match %+v, copies %v: want the two full blocks, no partial, no copy", mt, cow)
	}
	if !slices.Equal(a.Table[:2], b.Table[:2]) || a.Table[2] == b.Table[2] {
		t.Fatalf("tables %v and %v: want the first two blocks shared, the third not", a.Table, b.Table)
	}
	if got := m.meta[a.Table[0]].ref; got != 2 {
		t.Fatalf("shared block has %d references, want 2", got)
	}
	if m.Used() != 4 {
		t.Fatalf("%d blocks used, want 4 (2 shared + 1 each)", m.Used())
	}
	mustCheck(t, m, a, b)
	// The last known token is never matched, even when cached.
	c := seqOf(2, 1, 2, 3, 4)
	var mc Match
	m.Lookup(c, &mc)
	if mc.Tokens != 3 {
		t.Fatalf("prompt equal to a cached block: %d tokens matched, want 3 (the last is computed)", mc.Tokens)
	}
	st := m.Stats()
	if st.HitTokens != 8 || st.LookupTokens != 10+10 {
		t.Fatalf("stats %+v: want 8 hit tokens of 20 looked up", st)
	}
}

func TestCopyOnWriteAtDivergentToken(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 16, Caching: true})
	a := seqOf(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	admitAll(t, m, a)
	// b shares tokens 0..5 with a: block 0 whole, block 1 up to its third slot.
	b := seqOf(1, 1, 2, 3, 4, 5, 6, 70, 80, 90)
	mt, cow := admitAll(t, m, b)
	if len(mt.Full) != 1 || mt.Partial != a.Table[1] || mt.PartialLen != 2 || mt.Tokens != 6 {
		t.Fatalf("match %+v: want block 0 whole and 2 tokens of a's block %d", mt, a.Table[1])
	}
	if len(cow) != 1 || cow[0].Src != a.Table[1] || cow[0].Dst != b.Table[1] || cow[0].Tokens != 2 {
		t.Fatalf("copies %v: want a's block %d copied (2 tokens) into b's block %d", cow, a.Table[1], b.Table[1])
	}
	for i, want := range []int32{5, 6, 7, 8} {
		if got := m.tok[int(a.Table[1])*4+i]; got != want {
			t.Fatalf("a's shared block was written: slot %d is %d, want %d", i, got, want)
		}
	}
	for i, want := range []int32{5, 6, 70, 80} {
		if got := m.tok[int(b.Table[1])*4+i]; got != want {
			t.Fatalf("b's copy: slot %d is %d, want %d", i, got, want)
		}
	}
	if st := m.Stats(); st.CopyOnWrite != 1 || st.PartialTokens != 2 {
		t.Fatalf("stats %+v: want one copy, 2 partial tokens", st)
	}
	mustCheck(t, m, a, b)

	// Once a has ended its block is cached but unmapped: a third sequence
	// sharing 2 tokens of it takes it out of the cache and writes in place.
	m.Free(a)
	m.Free(b)
	mustCheck(t, m)
	c := seqOf(2, 1, 2, 3, 4, 5, 6, 71, 81)
	mt, cow = admitAll(t, m, c)
	if mt.PartialLen != 2 || len(cow) != 0 || c.Table[1] != mt.Partial {
		t.Fatalf("match %+v, copies %v, table %v: want 2 partial tokens written in place", mt, cow, c.Table)
	}
	mustCheck(t, m, c)
}

func TestDedupMergesIdenticalBlock(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 16, Caching: true})
	a := seqOf(0, 1, 2, 3, 4, 5)
	b := seqOf(1, 1, 2, 3, 4, 5)
	// Both reserve before either commits, as in one iteration: neither
	// finds the other's block in the cache at admission.
	var cow []Copy
	for _, s := range []*Seq{a, b} {
		if err := m.Reserve(s, 5, &cow); err != nil {
			t.Fatal(err)
		}
	}
	m.Commit(a, 5)
	m.Commit(b, 5)
	a.State, b.State = Running, Running
	if a.Table[0] != b.Table[0] || m.Stats().Dedups != 1 {
		t.Fatalf("tables %v %v, dedups %d: want b's full block merged into a's", a.Table, b.Table, m.Stats().Dedups)
	}
	if m.Used() != 3 {
		t.Fatalf("%d blocks used, want 3", m.Used())
	}
	mustCheck(t, m, a, b)
}

func TestEvictionLeastRecentlyUsed(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 2, Device: 4, Caching: true})
	a := seqOf(0, 1, 2, 3) // block [1 2] cached
	b := seqOf(1, 5, 6, 7) // block [5 6] cached
	admitAll(t, m, a)
	admitAll(t, m, b)
	m.Free(a) // [1 2] becomes evictable first
	m.Free(b)
	c := seqOf(2, 8, 9, 10, 11, 12, 13) // needs 3 blocks: 2 free + evicts [1 2]
	admitAll(t, m, c)
	if m.Stats().Evictions != 1 {
		t.Fatalf("%d evictions, want 1", m.Stats().Evictions)
	}
	var mt Match
	m.Lookup(seqOf(3, 5, 6, 7), &mt)
	if mt.Tokens != 2 {
		t.Fatalf("the more recent block [5 6] was evicted (match %+v)", mt)
	}
	m.Lookup(seqOf(4, 1, 2, 3), &mt)
	if mt.Tokens != 0 {
		t.Fatalf("the least recent block [1 2] is still cached (match %+v)", mt)
	}
	mustCheck(t, m, c)
}

func TestSwapKeepsContent(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 8, Host: 8, Caching: true})
	a := seqOf(0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	b := seqOf(1, 1, 2, 3, 4, 5, 6, 7, 8, 50)
	admitAll(t, m, a)
	admitAll(t, m, b) // shares two blocks with a
	var out, in []Copy
	if err := m.SwapOut(b, &out); err != nil {
		t.Fatal(err)
	}
	b.State = Swapped
	if len(out) != 3 || m.HostUsed() != 3 || m.meta[a.Table[0]].ref != 1 {
		t.Fatalf("swap-out copies %v, host used %d: want all 3 of b's blocks copied, a's shared ones kept", out, m.HostUsed())
	}
	mustCheck(t, m, a, b)
	if err := m.SwapIn(b, &in); err != nil {
		t.Fatal(err)
	}
	b.State = Running
	if len(in) != 3 || m.HostUsed() != 0 {
		t.Fatalf("swap-in copies %v, host used %d", in, m.HostUsed())
	}
	mustCheck(t, m, a, b) // checks b's tokens in its new blocks
	decode(t, m, b, 7)
	mustCheck(t, m, a, b)
}

func TestSwapOutNeedsHostRoom(t *testing.T) {
	m := newBlocks(t, BlockConfig{Size: 4, Device: 8, Host: 1})
	a := seqOf(0, 1, 2, 3, 4, 5, 6)
	admitAll(t, m, a)
	var out []Copy
	if err := m.SwapOut(a, &out); !errors.Is(err, ErrNoHostBlocks) || len(out) != 0 {
		t.Fatalf("swap-out of 2 blocks into 1: %v, %d copies; want ErrNoHostBlocks and nothing moved", err, len(out))
	}
	mustCheck(t, m, a)
}

func TestContiguousReservesMaxLength(t *testing.T) {
	m, err := Contiguous(64, 256, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := seqOf(0, 1, 2, 3, 4)
	admitAll(t, m, s)
	if m.Used() != 1 || m.Config().Size != 64 || m.Config().Device != 4 {
		t.Fatalf("contiguous: %d used of %d blocks of %d", m.Used(), m.Config().Device, m.Config().Size)
	}
	if waste := m.Used()*64 - m.UsedSlots(); waste != 60 {
		t.Fatalf("4 tokens in a 64-token reservation waste %d slots, want 60", waste)
	}
}

// TestCheckCatchesCorruption is the checker's negative control: each
// corruption of a correct state must be reported.
func TestCheckCatchesCorruption(t *testing.T) {
	build := func() (*Blocks, *Seq, *Seq) {
		m := newBlocks(t, BlockConfig{Size: 4, Device: 8, Caching: true})
		a := seqOf(0, 1, 2, 3, 4, 5, 6)
		b := seqOf(1, 1, 2, 3, 4, 9)
		admitAll(t, m, a)
		admitAll(t, m, b)
		mustCheck(t, m, a, b)
		return m, a, b
	}
	cases := []struct {
		name    string
		corrupt func(m *Blocks, a, b *Seq) []*Seq
	}{
		{"reference count", func(m *Blocks, a, b *Seq) []*Seq { m.meta[a.Table[1]].ref++; return []*Seq{a, b} }},
		{"token content", func(m *Blocks, a, b *Seq) []*Seq { m.tok[int(b.Table[1])*4]++; return []*Seq{a, b} }},
		{"freed block in a table", func(m *Blocks, a, b *Seq) []*Seq { b.Table[1] = m.free[0]; return []*Seq{a, b} }},
		{"leak", func(m *Blocks, a, b *Seq) []*Seq { m.Free(a); return nil }},
		{"table too short", func(m *Blocks, a, b *Seq) []*Seq { a.Computed += 4; return []*Seq{a, b} }},
		{"block twice in a table", func(m *Blocks, a, b *Seq) []*Seq {
			a.Table[1] = a.Table[0]
			return []*Seq{a, b}
		}},
		{"shared block not sealed", func(m *Blocks, a, b *Seq) []*Seq {
			m.meta[a.Table[0]].hashed = false
			return []*Seq{a, b}
		}},
		{"used counter", func(m *Blocks, a, b *Seq) []*Seq { m.used--; return []*Seq{a, b} }},
		{"free list duplicate", func(m *Blocks, a, b *Seq) []*Seq {
			m.free = append(m.free, m.free[0])
			return []*Seq{a, b}
		}},
		{"waiting sequence with blocks", func(m *Blocks, a, b *Seq) []*Seq { a.State = Waiting; return []*Seq{a, b} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, a, b := build()
			seqs := tc.corrupt(m, a, b)
			if err := m.Check(seqs); !errors.Is(err, ErrInvariant) {
				t.Fatalf("Check after corrupting the %s = %v, want ErrInvariant", tc.name, err)
			}
		})
	}
}

// FuzzBlocks drives random admit, grow, preempt, swap, cancel and finish
// sequences through a small block manager and checks every invariant after
// every step. Prompts share group prefixes that end inside blocks, so full
// matches, partial matches, copies on write, merges and evictions all occur.
func FuzzBlocks(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 1, 2, 0, 0, 3, 1, 4, 5, 0, 1})
	f.Add([]byte{0, 16, 32, 48, 1, 1, 1, 1, 1, 1, 2, 2, 0, 0, 0, 6, 6, 1, 1})
	f.Add([]byte{0, 7, 0, 7, 0, 7, 3, 3, 4, 4, 1, 1, 1, 1, 5, 5, 5})
	f.Add([]byte{0, 1, 0, 2, 0, 3, 0, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		m, err := NewBlocks(BlockConfig{Size: 4, Device: 12, Host: 6, Caching: true})
		if err != nil {
			t.Fatal(err)
		}
		var live []*Seq // running and swapped
		var waiting []*Seq
		id := 0
		var mt Match
		var copies []Copy
		admit := func(s *Seq) bool {
			m.Lookup(s, &mt)
			n := s.Len() - mt.Tokens
			if m.AdmitCost(&mt, n) > m.Available() {
				return false
			}
			m.Attach(s, &mt)
			if err := m.Reserve(s, n, &copies); err != nil {
				t.Fatalf("admission: %v", err)
			}
			m.Commit(s, n)
			s.State = Running
			return true
		}
		for i := 0; i < len(ops); i++ {
			op, arg := ops[i]%7, int(ops[i]/7)
			pick := func(list []*Seq) int { return arg % len(list) }
			switch {
			case op == 0: // a new request: group prefix of 1..7 tokens, own tokens after
				g := 1 + arg%3
				s := NewSeq(&Request{ID: id, Prompt: 2 + arg%9, Output: 40, Group: g, PrefixLen: min(1+(arg/3)%7, 2+arg%9)})
				id++
				if !admit(s) {
					waiting = append(waiting, s)
				} else {
					live = append(live, s)
				}
			case op == 1 && len(live) > 0: // a running sequence decodes one token
				s := live[pick(live)]
				if s.State != Running || s.Generated+1 >= s.Req.Output {
					continue
				}
				s.Generated++
				if m.ReserveCost(s, 1) > m.Available() {
					s.Generated--
					continue
				}
				if err := m.Reserve(s, 1, &copies); err != nil {
					t.Fatalf("decode: %v", err)
				}
				m.Commit(s, 1)
			case op == 2 && len(live) > 0: // preempt by recompute
				k := pick(live)
				s := live[k]
				m.Free(s)
				s.State = Waiting
				live = slices.Delete(live, k, k+1)
				waiting = append(waiting, s)
			case op == 3 && len(live) > 0: // swap out
				s := live[pick(live)]
				if s.State == Running && m.SwapOut(s, &copies) == nil {
					s.State = Swapped
				}
			case op == 4 && len(live) > 0: // swap in
				s := live[pick(live)]
				if s.State == Swapped && m.SwapIn(s, &copies) == nil {
					s.State = Running
				}
			case op == 5 && len(live) > 0: // finish or cancel
				k := pick(live)
				m.Free(live[k])
				live = slices.Delete(live, k, k+1)
			case op == 6 && len(waiting) > 0: // re-admit a waiting request
				k := pick(waiting)
				if admit(waiting[k]) {
					live = append(live, waiting[k])
					waiting = slices.Delete(waiting, k, k+1)
				}
			}
			if err := m.Check(append(slices.Clone(live), waiting...)); err != nil {
				t.Fatalf("after op %d (%d): %v", i, ops[i], err)
			}
		}
		for _, s := range live {
			m.Free(s)
		}
		if err := m.Check(nil); err != nil {
			t.Fatalf("after freeing everything: %v", err)
		}
	})
}
