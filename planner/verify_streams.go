package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// Two checks of a plan made for a program of several streams, neither of
// which reads the intervals the plan was made from (Temps): VerifyOrder
// asks the happens-before order itself about every two buffers that share
// bytes, and SimulateStreams executes the program's ops under many
// interleavings of its streams on a model of the arena.

// access positions of the caller, around the program's ops: an undonated
// input is written before the first op, an output or retained value is
// read after the last.
const (
	callerBefore = -1
	callerAfter  = -2
)

// bufferUse is what the program does with one planned buffer.
type bufferUse struct {
	first    int   // the op that writes it first, or callerBefore
	accesses []int // every op that writes or reads it (through views too), callerBefore/After included
}

// uses maps the problem's buffers to the program's accesses of them, and
// returns the happens-before order and the buffer (index+1) of every value
// in the arena, a view's being the one it views.
func (p Program) uses(pr Problem) ([]bufferUse, *Order, map[string]int, error) {
	writer, err := p.index()
	if err != nil {
		return nil, nil, nil, err
	}
	ord, err := p.order(writer)
	if err != nil {
		return nil, nil, nil, err
	}
	temps, err := p.Temps()
	if err != nil {
		return nil, nil, nil, err
	}
	byName := make(map[string]Temp, len(temps))
	for _, t := range temps {
		if t.Kind != Alias {
			byName[t.Name] = t
		}
	}
	readers := p.readers()
	out := make([]bufferUse, len(pr.Buffers))
	bufOf := make(map[string]int, len(p.Ops))
	for i, b := range pr.Buffers {
		t, ok := byName[b.ID]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: buffer %q is no value of the program", ErrBadPlan, b.ID)
		}
		u := bufferUse{first: writer[t.Values[0]]}
		if t.Kind == Input && !t.Donated {
			u.first = callerBefore
			u.accesses = append(u.accesses, callerBefore, callerAfter)
		}
		if t.Kind == Output || t.Kind == Retained {
			u.accesses = append(u.accesses, callerAfter)
		}
		for _, v := range t.Values {
			bufOf[v] = i + 1
			u.accesses = append(u.accesses, writer[v])
			u.accesses = append(u.accesses, readers[v]...)
		}
		slices.Sort(u.accesses)
		u.accesses = slices.Compact(u.accesses)
		out[i] = u
	}
	for _, op := range p.Ops { // in schedule order: a view's base comes first
		if op.View {
			bufOf[op.Out] = bufOf[op.In[0]]
		}
	}
	return out, ord, bufOf, nil
}

// before is Order.Before with the caller's accesses around the ops.
func (o *Order) before(a, b int) bool {
	switch {
	case a == b:
		return false
	case a == callerBefore || b == callerAfter:
		return true
	case a == callerAfter || b == callerBefore:
		return false
	}
	return o.Before(a, b)
}

// VerifyOrder checks a plan of the program's buffers against the
// happens-before order: any two buffers that share a byte must be ordered,
// every access of one happening before the first write of the other.
func (p Program) VerifyOrder(pr Problem, pl Plan) error {
	if err := checkShape(pr, pl); err != nil {
		return err
	}
	uses, ord, _, err := p.uses(pr)
	if err != nil {
		return err
	}
	// ordered reports whether all of x's accesses happen before y's first
	// write, or an access of x that does not.
	ordered := func(x, y int) (bool, int) {
		for _, a := range uses[x].accesses {
			if !ord.before(a, uses[y].first) {
				return false, a
			}
		}
		return true, 0
	}
	byOff := orderBy(len(pr.Buffers), func(i int) int64 { return pl.Offsets[i] })
	for k, a := range byOff {
		endA := pl.Offsets[a] + pr.Buffers[a].Size
		for _, b := range byOff[k+1:] {
			if pl.Offsets[b] >= endA {
				break
			}
			okAB, wa := ordered(a, b)
			okBA, wb := ordered(b, a)
			if okAB || okBA {
				continue
			}
			ba, bb := pr.Buffers[a], pr.Buffers[b]
			return fmt.Errorf("%w: buffers %q and %q share bytes [%d, %d) but are not ordered: %s does not happen before %s, nor %s before %s",
				ErrBadPlan, ba.ID, bb.ID, pl.Offsets[b], min(endA, pl.Offsets[b]+bb.Size),
				p.opName(wa), p.opName(uses[b].first), p.opName(wb), p.opName(uses[a].first))
		}
	}
	return nil
}

// opName names an op, or the caller, for an error.
func (p Program) opName(i int) string {
	switch i {
	case callerBefore:
		return "the caller's write before the program"
	case callerAfter:
		return "the caller's read after the program"
	}
	return fmt.Sprintf("op %d (%s, stream %d)", i, p.Ops[i].Fn, p.Ops[i].Stream)
}

// SimulateStreams executes the program on a model of the arena under runs
// interleavings of its streams and reports the first value found
// overwritten while in use. Each op begins (reads its inputs, then writes
// a tag unique to its output's buffer over the buffer's bytes) and later
// ends (reads its inputs and its output again); one stream's ops begin and
// end in schedule order, an op begins only after the ops it waits for
// (Waits) have ended, and between those rules the streams' events
// interleave: the first run lets stream 0 run ahead, the second the last
// stream, the others choose at random (seeded), half of them preferring to
// begin ops, so that ops overlap as much as they can. An op reading a
// buffer finds the buffer's own tag in every byte unless an op that may
// run beside it, or one the plan placed wrongly, wrote over it. Views read
// the buffer they view; ops outside the arena write nothing to it.
func (p Program) SimulateStreams(pr Problem, pl Plan, runs int, seed uint64) error {
	if err := checkShape(pr, pl); err != nil {
		return err
	}
	uses, ord, bufOf, err := p.uses(pr)
	if err != nil {
		return err
	}
	waits, err := p.Waits()
	if err != nil {
		return err
	}
	n := len(p.Ops)
	type opIO struct{ in, out []int }
	io := make([]opIO, n)
	for i, op := range p.Ops {
		for _, v := range op.In {
			if b := bufOf[v]; b > 0 && !slices.Contains(io[i].in, b-1) {
				io[i].in = append(io[i].in, b-1)
			}
		}
		if b := bufOf[op.Out]; b > 0 && !op.View && !op.Unplanned {
			io[i].out = []int{b - 1}
		}
	}
	for r := range runs {
		var rng *rand.Rand
		if r >= 2 {
			rng = rand.New(rand.NewPCG(seed, uint64(r)))
		}
		if err := p.simulateRun(pr, pl, uses, ord, waits, func(i int) ([]int, []int) { return io[i].in, io[i].out }, r, rng); err != nil {
			return fmt.Errorf("%w (interleaving %d of %d, seed %d)", err, r+1, runs, seed)
		}
	}
	return nil
}

// simulateRun is one interleaving of SimulateStreams: run 0 lets the
// first stream run ahead, run 1 the last, later runs choose by rng (odd
// runs begin ops before ending any when they can).
func (p Program) simulateRun(pr Problem, pl Plan, uses []bufferUse, ord *Order, waits [][]int, io func(int) (in, out []int), run int, rng *rand.Rand) error {
	arena := newTagMap(pl.Peak)
	tag := func(b int) int { return b + 1 }
	write := func(b int) { arena.set(pl.Offsets[b], pl.Offsets[b]+pr.Buffers[b].Size, tag(b)) }
	check := func(b int, when string) error {
		lo, hi := pl.Offsets[b], pl.Offsets[b]+pr.Buffers[b].Size
		if at, got, ok := arena.holds(lo, hi, tag(b)); !ok {
			by := "nothing yet"
			if got > 0 {
				by = fmt.Sprintf("buffer %q", pr.Buffers[got-1].ID)
			}
			return fmt.Errorf("%w: stream simulation: %s finds buffer %q (bytes [%d, %d)) overwritten at byte %d by %s",
				ErrBadPlan, when, pr.Buffers[b].ID, lo, hi, at, by)
		}
		return nil
	}
	for b, u := range uses {
		if u.first == callerBefore {
			write(b)
		}
	}
	ns := len(ord.ops)
	next := make([]int, ns)     // stream -> its next op (index into ord.ops[s])
	running := make([]bool, ns) // stream -> its op next[s] has begun
	ended := make([]bool, len(p.Ops))
	type action struct {
		s     int
		begin bool
	}
	var acts []action
	for {
		acts = acts[:0]
		for s := range ns {
			if next[s] == len(ord.ops[s]) {
				continue
			}
			if running[s] {
				acts = append(acts, action{s, false})
				continue
			}
			i := ord.ops[s][next[s]]
			ready := true
			for _, w := range waits[i] {
				ready = ready && ended[w]
			}
			if ready {
				acts = append(acts, action{s, true})
			}
		}
		if len(acts) == 0 {
			break
		}
		var a action
		switch {
		case run == 0:
			a = acts[0]
		case run == 1:
			a = acts[len(acts)-1]
		case run%2 == 1 && slices.ContainsFunc(acts, func(x action) bool { return x.begin }):
			begins := slices.DeleteFunc(slices.Clone(acts), func(x action) bool { return !x.begin })
			a = begins[rng.IntN(len(begins))]
		default:
			a = acts[rng.IntN(len(acts))]
		}
		i := ord.ops[a.s][next[a.s]]
		in, out := io(i)
		if a.begin {
			for _, b := range in {
				if err := check(b, "the begin of "+p.opName(i)); err != nil {
					return err
				}
			}
			for _, b := range out {
				write(b)
			}
			running[a.s] = true
			continue
		}
		for _, b := range append(in[:len(in):len(in)], out...) {
			if err := check(b, "the end of "+p.opName(i)); err != nil {
				return err
			}
		}
		running[a.s], ended[i] = false, true
		next[a.s]++
	}
	for s := range ns {
		if next[s] < len(ord.ops[s]) {
			return fmt.Errorf("%w: stream simulation: stream %d stops at %s, waiting for ops that never end", ErrInvalid, s, p.opName(ord.ops[s][next[s]]))
		}
	}
	for b, u := range uses {
		if slices.Contains(u.accesses, callerAfter) {
			if err := check(b, "the caller's read after the program"); err != nil {
				return err
			}
		}
	}
	return nil
}

// tagMap is the arena of SimulateStreams: the tag of the buffer that last
// wrote each byte, as sorted segments [lo, next segment's lo).
type tagMap struct {
	lo  []int64
	tag []int
}

func newTagMap(size int64) *tagMap {
	return &tagMap{lo: []int64{0, max(size, 1)}, tag: []int{0, 0}}
}

// seg returns the index of the segment holding byte x.
func (m *tagMap) seg(x int64) int {
	return sort.Search(len(m.lo), func(k int) bool { return m.lo[k] > x }) - 1
}

// split makes a segment start at x (0 < x), and returns its index.
func (m *tagMap) split(x int64) int {
	k := m.seg(x)
	if m.lo[k] == x {
		return k
	}
	m.lo = slices.Insert(m.lo, k+1, x)
	m.tag = slices.Insert(m.tag, k+1, m.tag[k])
	return k + 1
}

// set tags bytes [lo, hi).
func (m *tagMap) set(lo, hi int64, tag int) {
	a, b := m.split(lo), m.split(hi)
	m.lo = slices.Delete(m.lo, a+1, b)
	m.tag = slices.Delete(m.tag, a+1, b)
	m.tag[a] = tag
}

// holds reports whether every byte of [lo, hi) holds tag, or the first
// byte that does not and its tag.
func (m *tagMap) holds(lo, hi int64, tag int) (at int64, got int, ok bool) {
	for k := m.seg(lo); k < len(m.lo) && m.lo[k] < hi; k++ {
		if m.tag[k] != tag {
			return max(lo, m.lo[k]), m.tag[k], false
		}
	}
	return 0, 0, true
}
