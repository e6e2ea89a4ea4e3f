package engine

import (
	"context"
	"fmt"
	"sync"

	"gptlab/serving"
)

// async is the state Submit, Close and Stats share with Run's loop.
type async struct {
	mu      sync.Mutex
	pending []*Handle // submitted, not yet handed to the scheduler
	cancels []*Handle // cancel asked, not yet applied
	wake    chan struct{}
	closed  bool // Close called: Submit refuses
	running bool // Run is running
	stopped bool // Run has returned: Submit refuses
	stats   Stats
}

func (a *async) init() { a.wake = make(chan struct{}, 1) }

func (a *async) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Stats are the engine's counts as of the end of the last iteration.
type Stats struct {
	Running int // sequences admitted (holding device blocks)
	Waiting int // requests queued for admission, preempted ones included
	Swapped int // sequences swapped out to host blocks
	// KVUsage is the fraction of the pool's device blocks some sequence
	// maps (vLLM's gpu_cache_usage_perc, 0..1).
	KVUsage float64
	// PromptTokens and GeneratedTokens count the prompt tokens of the
	// requests admitted and the tokens generated (sent), since New.
	PromptTokens, GeneratedTokens int64
	Iterations                    int64
	Preemptions                   int64
	// PrefixHitTokens counts prompt tokens found in the prefix cache.
	PrefixHitTokens int64
}

// Stats returns the counts (safe from any goroutine).
func (e *Engine) Stats() Stats {
	e.async.mu.Lock()
	defer e.async.mu.Unlock()
	st := e.async.stats
	st.Waiting += len(e.async.pending)
	return st
}

// snapshot computes the stats on the loop's goroutine.
func (e *Engine) snapshot() Stats {
	var st Stats
	for _, h := range e.live {
		switch h.seq.State {
		case serving.Running:
			st.Running++
		case serving.Waiting:
			st.Waiting++
		case serving.Swapped:
			st.Swapped++
		}
	}
	st.KVUsage = float64(e.blocks.Used()) / float64(e.cfg.Blocks)
	st.PromptTokens, st.GeneratedTokens = e.counts.prompt, e.counts.generated
	st.Iterations = e.counts.iterations
	st.Preemptions = e.sched.Stats().Preemptions
	st.PrefixHitTokens = e.blocks.Stats().HitTokens
	return st
}

// publish stores the stats for Stats and Submit's queue limit.
func (e *Engine) publish() {
	st := e.snapshot()
	e.async.mu.Lock()
	e.async.stats = st
	e.async.mu.Unlock()
}

// Submit queues a request for Run's loop and returns its events: each
// generated token in order, then one event with the Finish, after which
// the channel is closed. The channel is buffered for the whole request,
// so the loop never waits for a slow reader. Cancelling ctx cancels the
// request (final event FinishCancelled with the context's cause). Submit
// refuses, with an error wrapping ErrBusy, when Config.MaxWaiting requests
// are already waiting; with ErrTooLong or ErrRequest a request Validate
// rejects; with ErrClosed after Close or once Run has returned. It is safe
// from many goroutines.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	if err := e.Validate(r); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCancelled, context.Cause(ctx))
	}
	a := &e.async
	a.mu.Lock()
	if a.closed || a.stopped {
		a.mu.Unlock()
		return nil, ErrClosed
	}
	if w := a.stats.Waiting + len(a.pending); w >= e.cfg.MaxWaiting {
		a.mu.Unlock()
		return nil, fmt.Errorf("%w: %d requests waiting, limit %d", ErrBusy, w, e.cfg.MaxWaiting)
	}
	h := e.newHandle(r)
	ch := make(chan Event, r.MaxTokens+1)
	h.out = ch
	a.pending = append(a.pending, h)
	// Registered under the lock: a cancel that fires at once waits for
	// it, and finds h pending; the loop reads h.stop after taking h.
	h.stop = context.AfterFunc(ctx, func() { e.requestCancel(h, context.Cause(ctx)) })
	a.mu.Unlock()
	a.poke()
	return ch, nil
}

// requestCancel asks the loop to cancel h (from any goroutine).
func (e *Engine) requestCancel(h *Handle, cause error) {
	a := &e.async
	a.mu.Lock()
	h.cause = cause
	a.cancels = append(a.cancels, h)
	a.mu.Unlock()
	a.poke()
}

// Close stops accepting requests: Submit returns ErrClosed from now on,
// and Run returns once every request it holds has finished (a drain).
// Cancel Run's context to stop sooner.
func (e *Engine) Close() {
	a := &e.async
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.poke()
}

// ErrRunning is returned by a second concurrent Run.
var ErrRunning = fmt.Errorf("engine: Run is already running")

// Run is the engine's loop: it takes submitted requests, steps while any
// is live and waits otherwise. It returns nil when ctx ends, after ending
// every request still held with ErrStopped, or after Close once the
// requests held have finished; an error when an iteration failed (an
// engine bug: the requests are ended with it). Run starts no goroutine.
func (e *Engine) Run(ctx context.Context) error {
	a := &e.async
	a.mu.Lock()
	if a.running || a.stopped {
		a.mu.Unlock()
		return ErrRunning
	}
	a.running = true
	a.mu.Unlock()
	err := e.loop(ctx)
	e.shutdown(err)
	return err
}

func (e *Engine) loop(ctx context.Context) error {
	a := &e.async
	for {
		closed := e.intake()
		e.publish()
		if ctx.Err() != nil {
			return nil
		}
		if e.Idle() {
			if closed {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-a.wake:
			}
			continue
		}
		if _, err := e.Step(); err != nil {
			return err
		}
	}
}

// intake hands the submitted requests to the scheduler and applies the
// cancellations; it reports whether Close was called.
func (e *Engine) intake() bool {
	a := &e.async
	a.mu.Lock()
	pending, cancels, closed := a.pending, a.cancels, a.closed
	a.pending, a.cancels = nil, nil
	a.mu.Unlock()
	for _, h := range pending {
		if err := e.admit(h); err != nil {
			e.end(h, FinishError, err)
		}
	}
	for _, h := range cancels {
		if !h.ended {
			e.Cancel(h, fmt.Errorf("%w: %w", ErrCancelled, h.cause))
		}
	}
	return closed
}

// shutdown ends every request still held when Run returns.
func (e *Engine) shutdown(err error) {
	a := &e.async
	a.mu.Lock()
	a.stopped, a.running = true, false
	pending := a.pending
	a.pending, a.cancels = nil, nil
	a.mu.Unlock()
	if err == nil {
		err = ErrStopped
	}
	for _, h := range pending {
		e.end(h, FinishError, err)
	}
	for _, h := range e.live {
		if !h.ended {
			e.sched.Cancel(h.seq)
			e.end(h, FinishError, err)
		}
	}
	e.prune()
	e.publish()
}
