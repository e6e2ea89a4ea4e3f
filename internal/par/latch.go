package par

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Latch is one goroutine's signal that it has finished something, waited
// for by another. The waiter polls: for spinFor on the processor, then
// asleep in short naps (napUntil). It never parks on a channel or a lock:
// a parked goroutine's wake-up, and that of the idle processor the runtime
// then has to find for whichever goroutine it displaces, go through the
// operating system, hundreds of microseconds on a virtual machine, and a
// park takes the runtime's wait records, which it allocates when its
// caches run dry at moments the scheduler decides. A step waits this way
// for a worker's last chunk, typically microseconds off. The zero value is
// ready for a first round; Reset makes it ready again.
type Latch struct{ done atomic.Bool }

// Reset readies the latch for a new round: call it before the work is
// handed over, never while a Done or Wait of the last round may run.
func (l *Latch) Reset() { l.done.Store(false) }

// Done says the work has finished; it never blocks.
func (l *Latch) Done() { l.done.Store(true) }

// Wait returns once Done has been called this round.
func (l *Latch) Wait() {
	ready := l.done.Load
	if !spinUntil(ready) {
		napUntil(ready, 0)
	}
}

// spinUntil polls ready for spinFor, yielding the processor now and then
// (a goroutine waiting for it may be the one that will make ready true),
// and reports whether ready became true.
func spinUntil(ready func() bool) bool {
	var deadline time.Time
	for i := 1; ; i++ {
		if ready() {
			return true
		}
		if i%64 != 0 {
			continue
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(spinFor)
		} else if now.After(deadline) {
			return false
		}
		runtime.Gosched()
	}
}

// The naps after a spin: from napMin, doubling to napMax.
const (
	napMin = 20 * time.Microsecond
	napMax = time.Millisecond
)

// napUntil polls ready between naps, for at most limit asleep (no limit
// if 0), and reports whether ready became true. A nap is the runtime's
// timer, which allocates nothing once a goroutine has slept once.
func napUntil(ready func() bool, limit time.Duration) bool {
	var slept time.Duration
	for d := napMin; ; d = min(2*d, napMax) {
		if ready() {
			return true
		}
		if limit > 0 && slept >= limit {
			return false
		}
		time.Sleep(d)
		slept += d
	}
}
