package serving

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// This file is the discrete-event simulator: a driver of a Scheduler whose
// clock is a cost model. Events (arrivals, cancellations, the end of the
// iteration in flight) come off a heap; the server schedules an iteration
// whenever it is idle and every event up to the current instant has been
// handled. Work per event and per iteration is proportional to the batch,
// never to the number of requests, so a run costs time linear in requests.

// SimConfig sets a simulation.
type SimConfig struct {
	Cost     Cost
	Check    bool // run the invariant checker after every iteration
	Timeline bool // keep a record of every iteration (small runs)
}

// IterRecord is one iteration of a timeline.
type IterRecord struct {
	Index      int64
	Start, End float64
	Entries    []EntryRecord
	UsedBlocks int   // device blocks mapped while it ran
	Preempted  []int // request IDs
	Finished   []int
	Copies     int // copy-on-write block copies
	Swaps      int // blocks swapped out or in
}

// EntryRecord is one entry of a timeline's iteration.
type EntryRecord struct {
	Req, Start, N int
	Sample        bool
}

// UtilPoint is the fraction of device blocks in use during an iteration
// starting at T.
type UtilPoint struct{ T, Used float64 }

// Result is what a simulation measured.
type Result struct {
	Rec    *Recorder
	Sched  SchedStats
	Blocks BlockStats
	End    float64 // when the last iteration ended (seconds)
	Busy   float64 // seconds spent in iterations
	// KVUsed is the mean fraction of device blocks in use while the server
	// is busy, weighted by iteration time; KVPeak the largest.
	KVUsed, KVPeak float64
	// Waste is the share of the device slots in use that hold no token
	// (internal fragmentation), weighted by iteration time.
	Waste    float64
	Util     []UtilPoint // thinned to at most maxUtilPoints, evenly in iterations
	Timeline []IterRecord
	Checks   int // invariant checks run
}

const maxUtilPoints = 2048

// ErrStuck says the scheduler left requests unserved with nothing left to
// wait for: a scheduler bug, never a workload's fault.
var ErrStuck = errors.New("simulation stuck")

// Simulate runs reqs through sched with time from cfg.Cost.
func Simulate(ctx context.Context, reqs []Request, sched Scheduler, cfg SimConfig) (*Result, error) {
	if err := cfg.Cost.Validate(); err != nil {
		return nil, err
	}
	order := make([]int32, len(reqs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch x, y := reqs[a].Arrival, reqs[b].Arrival; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	sim := &simulator{reqs: reqs, sched: sched, cfg: cfg, seqs: make([]*Seq, len(reqs)), rec: NewRecorder(), util: 1}
	res, err := sim.run(ctx, order)
	if err != nil {
		return nil, err
	}
	return res, nil
}

type simulator struct {
	reqs  []Request
	sched Scheduler
	cfg   SimConfig
	seqs  []*Seq
	slab  []Seq
	rec   *Recorder
	ev    eventHeap
	res   Result
	// weighted sums for KVUsed and Waste
	usedSum, slotSum, wasteSum float64
	util                       int // keep every util-th iteration's point
	iters                      int64
}

const (
	evCancel = iota // client events at an instant come before the iteration ending then
	evArrival
	evIterEnd
)

func (sim *simulator) newSeq(idx int32) *Seq {
	if len(sim.slab) == 0 {
		sim.slab = make([]Seq, 1024)
	}
	s := &sim.slab[0]
	sim.slab = sim.slab[1:]
	*s = Seq{Req: &sim.reqs[idx], scheduled: -1, slot: idx}
	sim.seqs[idx] = s
	return s
}

func (sim *simulator) run(ctx context.Context, order []int32) (*Result, error) {
	next := 0 // next arrival in order
	if len(order) > 0 {
		sim.ev.push(event{t: sim.reqs[order[0]].Arrival, kind: evArrival, idx: order[0]})
	}
	var b *Batch
	var start, now float64
	for n := 0; ; n++ {
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		if b == nil && (sim.ev.len() == 0 || sim.ev.top().t > now) {
			b = sim.sched.Schedule()
			if b.Empty() {
				b = nil
			} else {
				start = now
				dur := sim.cfg.Cost.Time(b.Work())
				sim.sample(b, now, dur)
				sim.ev.push(event{t: now + dur, kind: evIterEnd})
			}
		}
		if sim.ev.len() == 0 {
			break
		}
		e := sim.ev.pop()
		now = e.t
		switch e.kind {
		case evArrival:
			s := sim.newSeq(e.idx)
			r := s.Req
			sim.rec.Arrive(s)
			if err := sim.sched.Add(s); err != nil {
				if !errors.Is(err, ErrTooLarge) {
					return nil, err
				}
				sim.rec.Reject(s, now)
				sim.seqs[e.idx] = nil
			} else if r.Cancels() {
				sim.ev.push(event{t: r.Cancel, kind: evCancel, idx: e.idx})
			}
			if next++; next < len(order) {
				sim.ev.push(event{t: sim.reqs[order[next]].Arrival, kind: evArrival, idx: order[next]})
			}
		case evCancel:
			if s := sim.seqs[e.idx]; s != nil && sim.sched.Cancel(s) {
				sim.rec.Cancel(s, now)
				sim.seqs[e.idx] = nil
			}
		case evIterEnd:
			if err := sim.complete(b, start, now); err != nil {
				return nil, err
			}
			b = nil
		}
	}
	if live := sim.sched.Live(); live > 0 {
		return nil, fmt.Errorf("%w: %d requests unserved at t=%.3f s", ErrStuck, live, now)
	}
	if err := sim.sched.Check(); err != nil {
		return nil, fmt.Errorf("after the last request: %w", err)
	}
	sim.res.Checks++
	r := &sim.res
	r.Rec, r.Sched, r.Blocks, r.End = sim.rec, sim.sched.Stats(), sim.sched.Blocks().Stats(), now
	if r.Busy > 0 {
		r.KVUsed = sim.usedSum / r.Busy
	}
	if sim.slotSum > 0 {
		r.Waste = sim.wasteSum / sim.slotSum
	}
	return r, nil
}

// complete ends the iteration in flight at now.
func (sim *simulator) complete(b *Batch, start, now float64) error {
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Sample && e.Seq.State == Running {
			e.Token = e.Seq.NextSynthetic()
		}
	}
	var rec *IterRecord
	if sim.cfg.Timeline {
		sim.res.Timeline = append(sim.res.Timeline, IterRecord{Index: b.Iteration, Start: start, End: now,
			UsedBlocks: sim.sched.Blocks().Used(), Copies: len(b.Copies), Swaps: len(b.SwapOut) + len(b.SwapIn)})
		rec = &sim.res.Timeline[len(sim.res.Timeline)-1]
		for i := range b.Entries {
			e := &b.Entries[i]
			rec.Entries = append(rec.Entries, EntryRecord{Req: e.Seq.Req.ID, Start: e.Start, N: e.N, Sample: e.Sample})
		}
		for _, s := range b.Preempted {
			rec.Preempted = append(rec.Preempted, s.Req.ID)
		}
	}
	sim.sched.Complete(b)
	k := sim.rec.Iteration(now)
	for i := range b.Entries {
		e := &b.Entries[i]
		if st := e.Seq.State; e.Sample && (st == Running || st == Finished) {
			sim.rec.Token(e.Seq, k)
		}
	}
	for _, s := range b.Finished {
		sim.rec.Finish(s)
		sim.seqs[s.slot] = nil
		if rec != nil {
			rec.Finished = append(rec.Finished, s.Req.ID)
		}
	}
	if sim.cfg.Check {
		if err := sim.sched.Check(); err != nil {
			return fmt.Errorf("after iteration %d (t=%.6f s): %w", b.Iteration, now, err)
		}
		sim.res.Checks++
	}
	return nil
}

// sample adds the iteration about to run to the KV utilisation figures.
func (sim *simulator) sample(b *Batch, now, dur float64) {
	m := sim.sched.Blocks()
	cfg := m.Config()
	used := float64(m.Used()) / float64(cfg.Device)
	slots := float64(m.Used() * cfg.Size)
	written := float64(m.UsedSlots() + b.Tokens()) // this iteration's tokens fill their reserved slots
	sim.res.Busy += dur
	sim.usedSum += used * dur
	sim.slotSum += slots * dur
	sim.wasteSum += max(slots-written, 0) * dur
	sim.res.KVPeak = max(sim.res.KVPeak, used)
	if sim.iters%int64(sim.util) == 0 {
		sim.res.Util = append(sim.res.Util, UtilPoint{T: now, Used: used})
		if len(sim.res.Util) == maxUtilPoints {
			for i := 0; i < maxUtilPoints/2; i++ {
				sim.res.Util[i] = sim.res.Util[2*i]
			}
			sim.res.Util = sim.res.Util[:maxUtilPoints/2]
			sim.util *= 2
		}
	}
	sim.iters++
}

// event is one thing that happens at time t.
type event struct {
	t    float64
	kind int8
	idx  int32 // request index (arrivals, cancellations)
}

func (a event) before(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.idx < b.idx
}

// eventHeap is a binary min-heap of events.
type eventHeap struct{ h []event }

func (q *eventHeap) len() int   { return len(q.h) }
func (q *eventHeap) top() event { return q.h[0] }

func (q *eventHeap) push(e event) {
	q.h = append(q.h, e)
	for i := len(q.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.h[i].before(q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *eventHeap) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.h[l].before(q.h[m]) {
			m = l
		}
		if r < last && q.h[r].before(q.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}
