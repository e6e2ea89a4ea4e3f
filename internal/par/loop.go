package par

import "sync/atomic"

// Chunked is work cut into chunks that any goroutine may run: RunChunk(c)
// computes chunk c, touching nothing another chunk touches.
type Chunked interface{ RunChunk(c int) }

// Loop runs chunks [0, n) of w, each once, on the caller and on up to t-1
// workers of the pool, and returns when all have run. Chunks are claimed
// in order; which goroutine runs which depends on timing, so a chunk's
// result must not. A Loop with t < 2 runs the chunks in order on the
// caller. Passing a pointer as w allocates nothing.
func Loop(w Chunked, n, t int) {
	t = min(t, n, Workers()+1)
	if t < 2 {
		for c := range n {
			w.RunChunk(c)
		}
		return
	}
	var l *loop
	select {
	case l = <-loopFree:
	default:
		l = &loop{done: NewLatch()}
	}
	l.w, l.n = w, int64(n)
	l.next.Store(0)
	l.pending.Store(int64(n))
	l.refs.Store(1)
	l.done.Reset()
	for range t - 1 {
		l.refs.Add(1)
		if !offer(l) {
			l.refs.Add(-1) // the queue is full: the caller does more
		}
	}
	if !l.work() {
		l.done.Wait() // a worker has the last chunk
	}
	l.release()
}

// loop is one run of Loop. A worker may receive it after the caller has
// claimed every chunk, even after Loop has returned: it then claims none
// and only drops its reference; the last reference recycles the loop.
type loop struct {
	w       Chunked
	n       int64
	next    atomic.Int64 // the next chunk to claim
	pending atomic.Int64 // chunks not yet finished
	refs    atomic.Int32 // the caller and the offers not yet received
	done    *Latch       // a worker that finished the last chunk says so
}

// loopFree holds idle loops.
var loopFree = make(chan *loop, 16)

// RunTask is a worker's share (task).
func (l *loop) RunTask() {
	if l.work() {
		l.done.Done()
	}
	l.release()
}

// work runs chunks until none is left to claim, reporting whether it
// finished the last one.
func (l *loop) work() (last bool) {
	for {
		c := l.next.Add(1) - 1
		if c >= l.n {
			return false
		}
		l.w.RunChunk(int(c))
		if l.pending.Add(-1) == 0 {
			return true
		}
	}
}

// release drops one reference and recycles the loop after the last.
func (l *loop) release() {
	if l.refs.Add(-1) != 0 {
		return
	}
	l.w = nil
	select {
	case loopFree <- l:
	default:
	}
}
