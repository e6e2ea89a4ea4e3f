package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"gptlab/serving"
)

// IterTime is one measured iteration: its work and its wall time.
type IterTime struct {
	Work serving.Work
	Secs float64
}

// ReplayResult is a replayed workload's measurements.
type ReplayResult struct {
	Rec   *serving.Recorder // serving's metrics, on the wall clock
	Iters []IterTime
	Wall  float64 // seconds from the first arrival to the last iteration's end
	// Wake is the seconds the replay woke late for each arrival at an
	// idle engine (a timer and the OS's scheduling); Gaps the seconds
	// between one iteration's end and the next's start where it did not
	// wait for an arrival (admitting and recording). Neither is in Iters;
	// both are in the Recorder's times.
	Wake, Gaps []float64
}

// Replay serves reqs on the wall clock: each request is added when its
// Arrival (seconds from the start) has passed, the engine steps while any
// request is live and sleeps until the next arrival otherwise. Prompts
// are the requests' own tokens (Tokens) or, when nil, their synthetic
// tokens (shared prefixes included) folded into the vocabulary; every
// request is decoded greedily to its Output length. It records serving's
// metrics (a Recorder fed as the simulator feeds it) and every
// iteration's work and duration. Requests are not cancelled. The engine
// must be idle and not running Run.
func Replay(ctx context.Context, e *Engine, reqs []serving.Request) (*ReplayResult, error) {
	if !e.Idle() {
		return nil, fmt.Errorf("engine: replay on a busy engine")
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch x, y := reqs[a].Arrival, reqs[b].Arrival; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	rec := serving.NewRecorder()
	res := &ReplayResult{Rec: rec}
	V := int32(e.mcfg.Vocab)
	var k int // the recorder's index of the iteration that just ended
	e.onToken = func(h *Handle) { rec.Token(h.seq, k) }
	e.onFinish = func(h *Handle) { rec.Finish(h.seq) }
	defer func() { e.onToken, e.onFinish = nil, nil }()
	start := time.Now()
	now := func() float64 { return time.Since(start).Seconds() }
	next := 0
	end := -1.0 // the last iteration's end; -1 after a wait for an arrival
	for next < len(order) || !e.Idle() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := now()
		for ; next < len(order) && reqs[order[next]].Arrival <= t; next++ {
			q := reqs[order[next]]
			r := Request{MaxTokens: q.Output, Prompt: q.Tokens}
			if r.Prompt == nil {
				s := serving.NewSeq(&serving.Request{ID: q.ID, Prompt: q.Prompt, Group: q.Group, PrefixLen: q.PrefixLen})
				r.Prompt = make([]int32, q.Prompt)
				for i := range r.Prompt {
					r.Prompt[i] = s.Token(i) % V
				}
			}
			if err := e.Validate(r); err != nil {
				return nil, fmt.Errorf("replay: request %d: %w", q.ID, err)
			}
			h := e.newHandle(r)
			h.req.Arrival = q.Arrival
			if err := e.admit(h); err != nil {
				return nil, fmt.Errorf("replay: request %d: %w", q.ID, err)
			}
			rec.Arrive(h.seq)
		}
		if e.Idle() {
			if next < len(order) {
				at := reqs[order[next]].Arrival
				waitUntil(start, at)
				res.Wake = append(res.Wake, now()-at)
			}
			end = -1
			continue
		}
		t0 := now()
		if end >= 0 {
			res.Gaps = append(res.Gaps, t0-end)
		}
		e.beforeEvents = func() { k = rec.Iteration(now()) }
		info, err := e.Step()
		e.beforeEvents = nil
		if err != nil {
			return nil, err
		}
		end = now()
		if info.Entries > 0 {
			res.Iters = append(res.Iters, IterTime{Work: info.Work, Secs: end - t0})
		}
	}
	res.Wall = now()
	if len(order) > 0 {
		res.Wall -= reqs[order[0]].Arrival
	}
	return res, nil
}

// waitUntil returns at t seconds after start: a sleep to within a
// millisecond (timers wake late on a busy machine), then a yield loop.
func waitUntil(start time.Time, t float64) {
	at := start.Add(time.Duration(t * 1e9))
	if d := time.Until(at) - time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(at) {
		runtime.Gosched()
	}
}
