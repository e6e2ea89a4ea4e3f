package planner

import (
	"fmt"
	"math"
)

// Cost is what one op of a program takes, as measured: Alone with the
// machine to itself (its kernel may split across every core), Shared on
// one core while another stream's op runs beside it.
type Cost struct {
	Alone, Shared float64
}

// Assignment is a choice of stream for every op of a program, with the
// makespans the cost model gives it and one stream.
type Assignment struct {
	Streams    []int   // per op: 0 or 1
	OneStream  float64 // every op on one stream: the sum of the Alone costs
	TwoStreams float64 // the simulated makespan of Streams
}

// AssignStreams chooses a stream (0 or 1) for every op of the program,
// from measured costs: ops are taken in schedule order, and each goes to
// the stream that lets the ops so far finish first in Makespan's
// simulation (ties to its latest input's stream, else stream 0). Two
// independent ops side by side then land on two streams when running
// them together on one core each (Shared) beats running them one after
// the other on the whole machine (Alone), and stay on one stream
// otherwise. sync is the time a wait for another stream's op costs.
func (p Program) AssignStreams(costs []Cost, sync float64) (Assignment, error) {
	return p.AssignStreamsPinned(costs, sync, nil)
}

// AssignStreamsPinned is AssignStreams with some ops' streams given: op i
// runs on stream pin[i] where that is 0 or 1, and the scheduler chooses
// for the ops pinned to -1 (all of them when pin is nil). A step cut into
// two halves of its batch pins each half's ops to a stream of its own,
// and the scheduler places what the halves share.
func (p Program) AssignStreamsPinned(costs []Cost, sync float64, pin []int) (Assignment, error) {
	if len(costs) != len(p.Ops) {
		return Assignment{}, fmt.Errorf("%w: %d costs for %d ops", ErrInvalid, len(costs), len(p.Ops))
	}
	if pin != nil && len(pin) != len(p.Ops) {
		return Assignment{}, fmt.Errorf("%w: %d pins for %d ops", ErrInvalid, len(pin), len(p.Ops))
	}
	for i, s := range pin {
		if s < -1 || s > 1 {
			return Assignment{}, fmt.Errorf("%w: op %d pinned to stream %d", ErrInvalid, i, s)
		}
	}
	writer, err := p.index()
	if err != nil {
		return Assignment{}, err
	}
	q := p
	q.Ops = append([]Op(nil), p.Ops...)
	a := Assignment{Streams: make([]int, len(p.Ops))}
	for i := range q.Ops {
		q.Ops[i].Stream = 0
		a.OneStream += costs[i].Alone
	}
	prefix := q
	for i, op := range p.Ops {
		home := 0 // the stream of the latest input's writer
		latest := -1
		for _, in := range op.In {
			if w, ok := writer[in]; ok && w > latest {
				latest, home = w, a.Streams[w]
			}
		}
		prefix.Ops = q.Ops[:i+1]
		best, bestAt := home, math.Inf(1)
		choices := []int{home, 1 - home}
		if pin != nil && pin[i] >= 0 {
			choices = choices[:1]
			choices[0] = pin[i]
		}
		for _, s := range choices {
			q.Ops[i].Stream = s
			if t := makespan(prefix, writer, costs, sync); t < bestAt {
				best, bestAt = s, t
			}
		}
		q.Ops[i].Stream, a.Streams[i] = best, best
	}
	a.TwoStreams = makespan(q, writer, costs, sync)
	return a, nil
}

// Makespan simulates the program on its streams (0 and 1) with the given
// costs and returns when its last op ends. Each stream runs its ops in
// schedule order; an op starts once its stream is free and every op it
// reads from has ended (plus sync, from another stream). A running op
// advances at the rate of its Alone cost while the other stream runs
// nothing (that stream then helps it, as an executor's idle worker joins
// a split kernel) and at the rate of its Shared cost while both run.
func (p Program) Makespan(costs []Cost, sync float64) (float64, error) {
	if len(costs) != len(p.Ops) {
		return 0, fmt.Errorf("%w: %d costs for %d ops", ErrInvalid, len(costs), len(p.Ops))
	}
	if p.Streams() > 2 {
		return 0, fmt.Errorf("%w: the cost model knows two streams; the program has %d", ErrInvalid, p.Streams())
	}
	writer, err := p.index()
	if err != nil {
		return 0, err
	}
	return makespan(p, writer, costs, sync), nil
}

// makespan is Makespan on a checked program.
func makespan(p Program, writer map[string]int, costs []Cost, sync float64) float64 {
	var queue [2][]int
	for i, op := range p.Ops {
		queue[op.Stream] = append(queue[op.Stream], i)
	}
	end := make([]float64, len(p.Ops))
	done := make([]bool, len(p.Ops))
	var (
		next [2]int     // the stream's next op in its queue
		run  [2]bool    // the stream is running queue[s][next[s]]
		left [2]float64 // fraction of the running op still to do
		now  float64
	)
	// readyAt is when op i may start on stream s, or +Inf while an op it
	// reads from has not ended.
	readyAt := func(i, s int) float64 {
		t := 0.0
		for _, in := range p.Ops[i].In {
			w, ok := writer[in]
			if !ok {
				continue
			}
			if !done[w] {
				return math.Inf(1)
			}
			d := end[w]
			if p.Ops[w].Stream != s {
				d += sync
			}
			t = max(t, d)
		}
		return t
	}
	for {
		// Start what can start now; finish what takes no time.
		for progress := true; progress; {
			progress = false
			for s := range 2 {
				if run[s] || next[s] == len(queue[s]) {
					continue
				}
				i := queue[s][next[s]]
				if readyAt(i, s) > now {
					continue
				}
				if costs[i].Alone <= 0 && costs[i].Shared <= 0 {
					done[i], end[i] = true, now
					next[s]++
				} else {
					run[s], left[s] = true, 1
				}
				progress = true
			}
		}
		if !run[0] && !run[1] {
			// Nothing runs: wait for the earliest start, or stop.
			t := math.Inf(1)
			for s := range 2 {
				if next[s] < len(queue[s]) {
					t = min(t, readyAt(queue[s][next[s]], s))
				}
			}
			if math.IsInf(t, 1) {
				return now
			}
			now = t
			continue
		}
		both := run[0] && run[1]
		rate := func(s int) float64 {
			c := costs[queue[s][next[s]]]
			d := c.Alone
			if both {
				d = c.Shared
			}
			if d <= 0 {
				return math.Inf(1)
			}
			return 1 / d
		}
		// The next event: a running op ends, or an idle stream's op
		// becomes ready (the rates change then).
		dt := math.Inf(1)
		for s := range 2 {
			if run[s] {
				dt = min(dt, left[s]/rate(s))
			} else if next[s] < len(queue[s]) {
				dt = min(dt, readyAt(queue[s][next[s]], s)-now)
			}
		}
		for s := range 2 {
			if !run[s] {
				continue
			}
			left[s] -= dt * rate(s)
			if left[s] <= 1e-12 {
				i := queue[s][next[s]]
				run[s], done[i], end[i] = false, true, now+dt
				next[s]++
			}
		}
		now += dt
	}
}
