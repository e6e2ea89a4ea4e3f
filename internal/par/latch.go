package par

import (
	"runtime"
	"sync/atomic"
	"time"
)

// Latch is one goroutine's signal that it has finished something, waited
// for by one other goroutine. The waiter polls for spinFor before it
// parks: a parked goroutine's wake-up, and the idle processor the runtime
// then has to wake for whichever goroutine it displaces, go through the
// operating system, hundreds of microseconds on a virtual machine; a step
// waits this way for a worker's last chunk, typically a few microseconds
// off. The zero value is not ready: use NewLatch.
type Latch struct {
	state atomic.Int32 // latchRunning, latchDone or latchParked
	wake  chan struct{}
}

const (
	latchRunning = iota
	latchDone
	latchParked // the waiter is parked (or about to be) on wake
)

// NewLatch returns a latch ready for its first Reset.
func NewLatch() *Latch { return &Latch{wake: make(chan struct{}, 1)} }

// Reset readies the latch for a new round: call it before the work is
// handed over, never while a Done or Wait of the last round may run.
func (l *Latch) Reset() { l.state.Store(latchRunning) }

// Done says the work has finished; it never blocks.
func (l *Latch) Done() {
	if l.state.Swap(latchDone) == latchParked {
		l.wake <- struct{}{}
	}
}

// Wait returns once Done has been called this round.
func (l *Latch) Wait() {
	if spinUntil(func() bool { return l.state.Load() == latchDone }) {
		return
	}
	if l.state.CompareAndSwap(latchRunning, latchParked) {
		<-l.wake
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
