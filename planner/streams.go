package planner

import (
	"fmt"
	"slices"
)

// This file holds lifetimes under more than one stream. An op's Stream
// says which stream runs it: each stream runs its ops in schedule order,
// and an op waits for the ops of other streams that write the values it
// reads. A position in the schedule then no longer orders every two ops.
// The chapter (24.1): "For asynchronous multi-stream execution, replace
// simple list positions with happens-before reasoning." Op a happens
// before op b when a path of stream order and reads leads from a to b;
// two ops neither of which happens before the other may run at the same
// time, in either order.
//
// Storage may pass from one value to another only when every access of
// the first happens before the first write of the second. The placement
// algorithms work on intervals of positions, so each value gets the
// interval of positions at which it may be in use: from the first
// position of any op that may run beside its writer, to the last position
// of any op that may run beside its last reader (Window). Two values whose
// intervals are disjoint are ordered by happens-before (see Window), so
// every interval planner stays correct; the price is storage the
// intervals keep longer than the exact order would. VerifyOrder checks a
// plan against the order itself and SimulateStreams runs it under
// interleavings of the streams: neither uses the intervals.

// MaxStreams bounds the streams of a program.
const MaxStreams = 8

// Order is the happens-before relation of a program's ops.
type Order struct {
	stream []int     // op -> its stream
	seq    []int     // op -> its place among its stream's ops
	ops    [][]int   // stream -> its ops in schedule order
	clock  [][]int32 // op -> per stream, how many of that stream's ops happen before it or are it
}

// Streams is how many streams the program's ops name (1 + the largest
// Stream).
func (p Program) Streams() int {
	n := 1
	for _, op := range p.Ops {
		n = max(n, op.Stream+1)
	}
	return n
}

// Order derives the happens-before relation: an op happens after the op
// before it on its stream and after the writers of the values it reads.
func (p Program) Order() (*Order, error) {
	writer, err := p.index()
	if err != nil {
		return nil, err
	}
	return p.order(writer)
}

func (p Program) order(writer map[string]int) (*Order, error) {
	n, ns := len(p.Ops), p.Streams()
	if ns > MaxStreams {
		return nil, fmt.Errorf("%w: %d streams; at most %d", ErrInvalid, ns, MaxStreams)
	}
	o := &Order{stream: make([]int, n), seq: make([]int, n), ops: make([][]int, ns), clock: make([][]int32, n)}
	flat := make([]int32, n*ns)
	for i, op := range p.Ops {
		if op.Stream < 0 {
			return nil, fmt.Errorf("%w: op %d (%s) has stream %d", ErrInvalid, i, op.Fn, op.Stream)
		}
		s := op.Stream
		c := flat[i*ns : (i+1)*ns : (i+1)*ns]
		if k := len(o.ops[s]); k > 0 {
			copy(c, o.clock[o.ops[s][k-1]])
		}
		for _, in := range op.In {
			if w, ok := writer[in]; ok {
				for t, x := range o.clock[w] {
					c[t] = max(c[t], x)
				}
			}
		}
		o.stream[i], o.seq[i] = s, len(o.ops[s])
		o.ops[s] = append(o.ops[s], i)
		c[s] = int32(o.seq[i] + 1)
		o.clock[i] = c
	}
	return o, nil
}

// Before reports whether op a happens before op b (a != b).
func (o *Order) Before(a, b int) bool {
	return a != b && o.clock[b][o.stream[a]] > int32(o.seq[a])
}

// Concurrent reports whether ops a and b may run at the same time: they
// are different and neither happens before the other.
func (o *Order) Concurrent(a, b int) bool { return a != b && !o.Before(a, b) && !o.Before(b, a) }

// Stream is the stream that runs op i.
func (o *Order) Stream(i int) int { return o.stream[i] }

// Waits lists, for op i, the ops of other streams it must wait for: on
// each other stream, the last op whose value it reads directly, unless an
// earlier op of its own stream already waited for that one or a later one.
// An executor that makes each op wait for these runs the program in its
// happens-before order.
func (p Program) Waits() ([][]int, error) {
	writer, err := p.index()
	if err != nil {
		return nil, err
	}
	o, err := p.order(writer)
	if err != nil {
		return nil, err
	}
	waits := make([][]int, len(p.Ops))
	for i, op := range p.Ops {
		s := o.stream[i]
		var before []int32 // what the op before i on its stream happens after
		if q := o.seq[i]; q > 0 {
			before = o.clock[o.ops[s][q-1]]
		}
		latest := make(map[int]int) // other stream -> the latest of its ops i reads
		for _, in := range op.In {
			if w, ok := writer[in]; ok && o.stream[w] != s && w >= latest[o.stream[w]] {
				latest[o.stream[w]] = w
			}
		}
		for t := range len(o.ops) {
			w, ok := latest[t]
			if ok && (before == nil || int32(o.seq[w]) >= before[t]) {
				waits[i] = append(waits[i], w)
			}
		}
	}
	return waits, nil
}

// Earliest returns the first position of an op that may run at the same
// time as op i, or i's own. A value is in use from the earliest position
// of its first writer to the last position of an op that reads it
// (Temps): if x's interval ends before y's begins, every access a of x
// happens before y's first write w. For otherwise either w happens before
// a, and then w comes before a in the schedule, or the two may run
// together, and then a is at or after Earliest(w); both contradict
// a <= x's last < Earliest(w) <= w.
func (o *Order) Earliest(i int) int {
	lo := i
	s := o.stream[i]
	for t, ops := range o.ops {
		if t == s {
			continue
		}
		// Ops of stream t before seq clock[i][t] happen before i; the
		// next one, if it comes before i, may run beside it.
		if a := int(o.clock[i][t]); a < len(ops) && ops[a] < lo && o.clock[ops[a]][s] <= int32(o.seq[i]) {
			lo = ops[a]
		}
	}
	return lo
}

// readers lists, for every value, the ops that read it directly or
// through views of it.
func (p Program) readers() map[string][]int {
	direct := make(map[string][]int, len(p.Ops))
	for i, op := range p.Ops {
		for _, in := range op.In {
			if len(direct[in]) == 0 || direct[in][len(direct[in])-1] != i {
				direct[in] = append(direct[in], i)
			}
		}
	}
	all := make(map[string][]int, len(direct))
	var collect func(name string, into []int) []int
	collect = func(name string, into []int) []int {
		for _, r := range direct[name] {
			into = append(into, r)
			if op := p.Ops[r]; op.View && op.In[0] == name {
				into = collect(op.Out, into)
			}
		}
		return into
	}
	for name := range direct {
		rs := collect(name, nil)
		slices.Sort(rs)
		all[name] = slices.Compact(rs)
	}
	return all
}

// multiStream reports whether the program names a stream other than 0.
func (p Program) multiStream() bool {
	for _, op := range p.Ops {
		if op.Stream != 0 {
			return true
		}
	}
	return false
}
