package par

import "time"

// Streams: work that runs beside the caller for a while (one stream of a
// program's ops, the other stream being the caller's), and the wait of
// one stream for the other. A waiting stream lends its core: it runs the
// chunks of loops the other stream offers to the pool, so an op whose
// kernel splits its work takes both cores while the other stream has
// nothing to do, and one core while both have.

// Task is work handed to a worker by Start: RunTask is called once.
type Task interface{ RunTask() }

// Start hands t to a worker of the pool, which runs it beside the caller,
// and reports whether it could: false when the pool has no worker (one
// usable CPU) or its queue of streams is full, and then the caller must
// run t's work itself. Passing a pointer as t allocates nothing. t must
// not wait for work only the caller's later loops would do: a stream may
// wait for another stream's ops (Await), which run anyway.
func Start(t Task) bool {
	if Workers() == 0 {
		return false
	}
	select {
	case pool.long <- t:
		return true
	default:
		return false
	}
}

// Await returns once ready reports true. Meanwhile the caller runs the
// chunks of loops offered to the pool (never a stream), polling as a
// worker does: on the processor until spinFor has passed since the last
// chunk it ran (or since the call), then between naps.
func Await(ready func() bool) { await(ready, false) }

// AwaitTimed is Await that also returns how long the caller spent running
// other loops' chunks while it waited (a clock read around each).
func AwaitTimed(ready func() bool) time.Duration { return await(ready, true) }

func await(ready func() bool, timed bool) time.Duration {
	var ran time.Duration
	for {
		helped := false
		poll := func() bool {
			if ready() {
				return true
			}
			select {
			case t := <-pool.jobs:
				if timed {
					t0 := time.Now()
					t.RunTask()
					ran += time.Since(t0)
				} else {
					t.RunTask()
				}
				helped = true
				return true
			default:
				return false
			}
		}
		if spinUntil(poll) {
			if !helped {
				return ran
			}
			continue // a chunk ran: spin afresh
		}
		if napUntil(poll, 0) && !helped {
			return ran
		}
	}
}
