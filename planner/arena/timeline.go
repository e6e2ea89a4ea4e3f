package arena

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// A timeline of the two streams: what each stream did in a run (its ops'
// time, its waits for the other stream's ops, when it finished) and which
// ops waited longest. A wait is not all lost: while a stream waits it runs
// chunks of the other stream's split kernels (par.AwaitTimed), and the
// timeline says how long; a stream's Busy is its own ops' time, helped or
// not.

// StreamTime is one stream's share of a run.
type StreamTime struct {
	Ops      int           // the steps it runs
	Busy     time.Duration // running its ops
	Waiting  time.Duration // waiting for the other stream's ops before its own
	Helping  time.Duration // of Waiting, running chunks of the other stream's split kernels
	Finished time.Duration // when its last op ended, from the run's start
}

// Wait is one step's wait for the other stream: the median over the
// timed runs, and the step of the other stream it waited for that ended
// last in the last run.
type Wait struct {
	Step, For int
	Stream    int // the waiting step's stream
	Op, ForOp string
	Time      time.Duration
}

// Timeline is what Timeline measured.
type Timeline struct {
	Runs    int
	Run     time.Duration // the median run
	Streams [2]StreamTime // in the median run
	Waits   []Wait        // every step whose median wait is at least MinWait, longest first
}

// MinWait is the shortest median wait Timeline lists: about what an op
// of a few thousand elements takes, below which a wait is the handover
// itself.
const MinWait = 20 * time.Microsecond

// trace is the clock of one timed run.
type trace struct {
	start time.Time
	steps []stepTime
}

type stepTime struct {
	waited, helped, ran, end time.Duration
}

func (t *trace) now() time.Duration { return time.Since(t.start) }

// Timeline runs the program runs times on its two streams, timing every
// step (two clock reads each), and returns the median run's streams and
// each step's median wait. It is an error on a program that runs on one
// stream.
func (p *Program) Timeline(runs int) (Timeline, error) {
	st := &p.streams
	switch {
	case runs < 1:
		return Timeline{}, fmt.Errorf("arena: a timeline of %d runs", runs)
	case st.n < 2:
		return Timeline{}, fmt.Errorf("arena: a timeline of two streams, but the program runs on one")
	}
	if err := p.loadInputs(); err != nil {
		return Timeline{}, err
	}
	tr := &trace{steps: make([]stepTime, len(p.steps))}
	st.trace = tr
	defer func() { st.trace = nil }()
	run := make([]time.Duration, runs)
	per := make([][2]StreamTime, runs)
	waits := make([][]time.Duration, len(p.steps))
	for r := range runs {
		clear(tr.steps)
		tr.start = time.Now()
		if err := p.runStreams(); err != nil {
			return Timeline{}, err
		}
		run[r] = time.Since(tr.start)
		if last := st.steps[1][len(st.steps[1])-1]; tr.steps[last].end == 0 {
			return Timeline{}, fmt.Errorf("arena: a timeline of two streams, but the pool had no worker to run the second")
		}
		for s := range 2 {
			x := &per[r][s]
			x.Ops = len(st.steps[s])
			for _, i := range st.steps[s] {
				t := tr.steps[i]
				x.Busy, x.Waiting, x.Helping = x.Busy+t.ran, x.Waiting+t.waited, x.Helping+t.helped
				x.Finished = max(x.Finished, t.end)
				if len(st.waits[i]) > 0 {
					waits[i] = append(waits[i], t.waited)
				}
			}
		}
	}
	tl := Timeline{Runs: runs, Run: median(run)}
	tl.Streams = per[slices.Index(run, tl.Run)]
	for i, ws := range waits {
		if len(ws) == 0 {
			continue
		}
		m := median(ws)
		if m < MinWait {
			continue
		}
		w := Wait{Step: i, Stream: int(st.of[i]), Op: p.steps[i].op.String(), Time: m, For: -1}
		for _, j := range st.waits[i] {
			if w.For < 0 || tr.steps[j].end > tr.steps[w.For].end {
				w.For = int(j)
			}
		}
		w.ForOp = p.steps[w.For].op.String()
		tl.Waits = append(tl.Waits, w)
	}
	slices.SortFunc(tl.Waits, func(a, b Wait) int {
		return cmp.Or(cmp.Compare(b.Time, a.Time), cmp.Compare(a.Step, b.Step))
	})
	return tl, nil
}
