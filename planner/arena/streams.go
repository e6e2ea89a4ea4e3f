package arena

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"gptlab/internal/par"
	"gptlab/planner"
)

// Two streams. SetStreams puts each op of the schedule on stream 0 or 1;
// Run then runs stream 0 on the caller and stream 1 on a worker of the
// pool (package par), each in schedule order, an op waiting for the ops
// of the other stream whose values it reads (planner.Program.Waits). The
// arena is planned for the two streams: two values share storage only when
// every access of the first happens before the first write of the second
// (planner's streams.go), and Verify checks the plan against that order.
// An op computes the same values in the same order on either stream, so a
// run gives the same bits as on one stream; what changes is which op runs
// beside which. While one stream waits it runs chunks of the other's
// split kernels (par.Await): an op has both cores while the other stream
// has nothing to do, one while both have.

// streamState is a program's streams.
type streamState struct {
	n      int       // 1 or 2
	of     []uint8   // per step: its stream
	steps  [2][]int  // per stream: its steps in schedule order
	waits  [][]int32 // per step: the other stream's steps it waits for
	done   []atomic.Uint32
	gen    uint32 // the run: a step is done when done[i] == gen
	failed atomic.Bool
	second secondStream
	trace  *trace // while Timeline runs: the times of every step (timeline.go)
}

// secondStream is stream 1's work as a task of the pool.
type secondStream struct {
	p    *Program
	err  error
	done atomic.Bool
}

// RunTask runs stream 1 (par.Task).
func (s *secondStream) RunTask() {
	s.err = s.p.runStream(1)
	s.done.Store(true)
}

// SetStreams plans the program again for ops on the streams given, one per
// step of the schedule (0 or 1; nil, or all 0, is one stream), and binds
// it: lifetimes by happens-before, in-place writes only where every other
// reader happens before, a new arena.
func (p *Program) SetStreams(ctx context.Context, streams []int) error {
	if streams != nil && len(streams) != len(p.steps) {
		return fmt.Errorf("arena: %d streams for %d steps", len(streams), len(p.steps))
	}
	two := false
	for i, s := range streams {
		if s != 0 && s != 1 {
			return fmt.Errorf("arena: step %d on stream %d: the executor runs streams 0 and 1", i, s)
		}
		two = two || s == 1
	}
	if !two {
		streams = nil
	}
	if err := p.planLifetimes(ctx, p.retain, p.opts, streams); err != nil {
		return err
	}
	st := &p.streams
	st.n, st.of, st.steps, st.waits = 1, nil, [2][]int{}, nil
	if !two {
		return nil
	}
	waits, err := p.lifetimes.Waits()
	if err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	st.n = 2
	st.of = make([]uint8, len(p.steps))
	st.waits = make([][]int32, len(p.steps))
	for i, s := range streams {
		st.of[i] = uint8(s)
		st.steps[s] = append(st.steps[s], i)
		for _, w := range waits[i] {
			st.waits[i] = append(st.waits[i], int32(w))
		}
	}
	st.done = make([]atomic.Uint32, len(p.steps))
	st.second.p = p
	return nil
}

// Streams returns the stream of every step (all 0 on one stream).
func (p *Program) Streams() []int {
	out := make([]int, len(p.steps))
	for i, s := range p.streams.of {
		out[i] = int(s)
	}
	return out
}

// runStreams is Run on two streams; with no worker to run stream 1 beside
// the caller, the caller runs every step in schedule order (an order the
// waits allow).
func (p *Program) runStreams() error {
	st := &p.streams
	st.gen++
	st.failed.Store(false)
	st.second.err = nil
	st.second.done.Store(false)
	if !par.Start(&st.second) {
		return p.runSequential()
	}
	err := p.runStream(0)
	par.Await(st.second.done.Load)
	if err == nil {
		err = st.second.err
	}
	return err
}

// runStream runs stream s's steps in order, each after the steps it
// waits for; it stops early once either stream has failed.
func (p *Program) runStream(s int) error {
	st := &p.streams
	tr := st.trace
	for _, i := range st.steps[s] {
		var t0 time.Duration
		if tr != nil && len(st.waits[i]) > 0 {
			t0 = tr.now()
		}
		for _, w := range st.waits[i] {
			ready := func() bool { return st.done[w].Load() == st.gen || st.failed.Load() }
			if tr != nil {
				tr.steps[i].helped += par.AwaitTimed(ready)
			} else {
				par.Await(ready)
			}
		}
		if st.failed.Load() {
			return nil
		}
		if tr != nil {
			if len(st.waits[i]) > 0 {
				tr.steps[i].waited = tr.now() - t0
			} else {
				t0 = tr.now()
			}
		}
		if err := p.runStep(i, s); err != nil {
			st.failed.Store(true)
			return err
		}
		if tr != nil {
			tr.steps[i].end = tr.now()
			tr.steps[i].ran = tr.steps[i].end - t0 - tr.steps[i].waited
		}
		st.done[i].Store(st.gen)
	}
	return nil
}

// Costs measures every step's time as the stream scheduler needs it
// (planner.Cost): Alone is the median of runs profiled runs as the program
// runs now, its kernels free to split across the pool; Shared the median
// with every kernel on its caller alone (par.SetLimit(1)), as when the
// other stream keeps the second core.
func (p *Program) Costs(runs int) ([]planner.Cost, error) {
	alone, err := p.Profile(runs)
	if err != nil {
		return nil, err
	}
	prev := par.SetLimit(1)
	shared, err := p.Profile(runs)
	par.SetLimit(prev)
	if err != nil {
		return nil, err
	}
	out := make([]planner.Cost, len(alone))
	for i := range out {
		out[i] = planner.Cost{Alone: alone[i].Seconds(), Shared: shared[i].Seconds()}
	}
	return out, nil
}

// StreamChoice is what ChooseStreams measured and chose.
type StreamChoice struct {
	Assignment planner.Assignment // the scheduler's streams and makespans (seconds)
	Steps      [2]int             // ops on stream 0 and on stream 1
	One, Two   time.Duration      // ChooseStreams: median run on one stream and on two
	ArenaOne   int64              // the arena's bytes on one stream
	ArenaTwo   int64              // on two
	Chosen     int                // the streams the program runs on now: 1 or 2
}

// streamSync is the cost model's price of a wait for the other stream: a
// store and a load of one flag between two cores that poll it.
const streamSync = 2e-6

// AssignStreams measures the program's steps (Costs, runs profiled runs
// each way) and assigns streams from those costs (AssignStreamsFrom).
func (p *Program) AssignStreams(ctx context.Context, runs int) (StreamChoice, error) {
	return p.AssignStreamsPinned(ctx, runs, nil)
}

// AssignStreamsPinned is AssignStreams with the streams of some steps
// given: step i on stream pin[i] where that is 0 or 1, the scheduler
// choosing for the rest (-1; all of them when pin is nil).
func (p *Program) AssignStreamsPinned(ctx context.Context, runs int, pin []int) (StreamChoice, error) {
	if runs < 1 {
		return StreamChoice{}, fmt.Errorf("arena: assigning streams from %d runs", runs)
	}
	if p.streams.n > 1 {
		return StreamChoice{}, fmt.Errorf("arena: assigning streams to a program already on %d", p.streams.n)
	}
	costs, err := p.Costs(runs)
	if err != nil {
		return StreamChoice{}, err
	}
	return p.assignFrom(ctx, costs, pin)
}

// AssignStreamsFrom lets the stream scheduler assign the program's steps
// to two streams from costs, one per step (planner.Program.AssignStreams),
// and plans the arena for them: the program then runs on two streams,
// unless the scheduler put every op on one or the pool has no worker. The
// program must be on one stream.
func (p *Program) AssignStreamsFrom(ctx context.Context, costs []planner.Cost) (StreamChoice, error) {
	return p.assignFrom(ctx, costs, nil)
}

// AssignStreamsFromPinned is AssignStreamsFrom with the streams of some
// steps given, as AssignStreamsPinned takes them.
func (p *Program) AssignStreamsFromPinned(ctx context.Context, costs []planner.Cost, pin []int) (StreamChoice, error) {
	return p.assignFrom(ctx, costs, pin)
}

// assignFrom is AssignStreamsFrom with pinned steps (AssignStreamsPinned).
func (p *Program) assignFrom(ctx context.Context, costs []planner.Cost, pin []int) (StreamChoice, error) {
	var c StreamChoice
	if p.streams.n > 1 {
		return c, fmt.Errorf("arena: assigning streams to a program already on %d", p.streams.n)
	}
	c.ArenaOne, c.ArenaTwo, c.Chosen = p.plan.Peak, p.plan.Peak, 1
	var err error
	if c.Assignment, err = p.lifetimes.AssignStreamsPinned(costs, streamSync, pin); err != nil {
		return c, fmt.Errorf("arena: %w", err)
	}
	for _, s := range c.Assignment.Streams {
		c.Steps[s]++
	}
	if c.Steps[1] == 0 || par.Workers() == 0 {
		return c, nil
	}
	if err := p.SetStreams(ctx, c.Assignment.Streams); err != nil {
		return c, err
	}
	c.ArenaTwo, c.Chosen = p.plan.Peak, 2
	return c, p.loadInputs()
}

// ChooseStreams is AssignStreams, then runs interleaved rounds of the
// program in schedule order on the caller and on the two streams, and
// keeps the faster (planning the arena again for one stream if that is
// schedule order). Each run is a full run of the program.
func (p *Program) ChooseStreams(ctx context.Context, runs int) (StreamChoice, error) {
	c, err := p.AssignStreams(ctx, runs)
	if err != nil || c.Chosen == 1 {
		return c, err
	}
	// Both ways on the two-stream arena, interleaved: schedule order on
	// the caller alone (what one stream runs), and the two streams.
	times := [2][]time.Duration{}
	for range runs {
		for k, run := range []func() error{p.runSequential, p.runStreams} {
			t0 := time.Now()
			if err := run(); err != nil {
				return c, err
			}
			times[k] = append(times[k], time.Since(t0))
		}
	}
	c.One, c.Two = median(times[0]), median(times[1])
	if c.Two < c.One {
		return c, nil
	}
	c.Chosen = 1
	return c, p.SetStreams(ctx, nil)
}

// runSequential runs every step in schedule order on the caller, whatever
// the streams (the inputs loaded).
func (p *Program) runSequential() error {
	for i := range p.steps {
		if err := p.runStep(i, 0); err != nil {
			return err
		}
	}
	return nil
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}
