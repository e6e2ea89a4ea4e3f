// Package par runs a loop over rows on a small pool of long-lived worker
// goroutines, with fixed chunk boundaries and no allocation per run, for
// the kernels of the model and of the arena executor.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The row-parallel kernels share a small pool of long-lived worker
// goroutines (one fewer than the usable CPUs, at most MaxParts-1), started
// on first use. A kernel bound to fixed storage cuts its rows once, at
// bind time, into a few chunks per CPU and pre-allocates one helper per
// worker. Running it offers the helpers to the pool, then the caller and
// whichever helpers a worker picks up claim chunks from a shared atomic
// counter until none is left; the caller then waits only for the chunks
// in flight on a worker, and takes back any helper no worker picked up.
// No allocation per run, and on a machine whose other cores are busy the
// caller simply does most of the work itself instead of waiting for a
// descheduled worker. Every row is computed by exactly one goroutine, in
// a fixed order of summation, with fixed chunk boundaries, so results
// never depend on the split or on who ran what.

// MaxParts bounds the goroutines one kernel runs on.
const MaxParts = 4

// chunksPerPart is how many chunks each goroutine's share is cut into.
const chunksPerPart = 4

// limit caps the goroutines of splits made from now on.
var limit atomic.Int64

func init() { limit.Store(MaxParts) }

// SetLimit caps the goroutines of the splits made from now on (n < 1
// means 1; tests set 1 to compare a split kernel with its serial run), and
// while it is 1 every split runs on its caller alone; it returns the
// previous cap.
func SetLimit(n int) int { return int(limit.Swap(int64(max(n, 1)))) }

// Workers is the number of pool goroutines besides the caller (0 with
// one usable CPU: nothing is ever split).
func Workers() int {
	pool.once.Do(startPool)
	return pool.workers
}

// parallelMinWork is the work (elements touched) below which a kernel
// runs on the calling goroutine: handing work to a worker costs a few
// microseconds.
const parallelMinWork = 1 << 16

// helper is a worker's share of one split kernel.
type helper struct {
	s     *Split
	taken atomic.Bool   // claimed, by a worker or the caller, this run
	done  chan struct{} // a worker that ran the helper says so (buffered)
}

var pool struct {
	once    sync.Once
	jobs    chan *helper
	workers int
}

func startPool() {
	pool.workers = min(runtime.GOMAXPROCS(0), MaxParts) - 1
	pool.jobs = make(chan *helper, 64)
	for range pool.workers {
		go func() {
			// a helper may be offered again before an earlier offer is
			// received: only the first claim of a run counts.
			for h := range pool.jobs {
				if h.taken.CompareAndSwap(false, true) {
					h.s.work()
					h.done <- struct{}{}
				}
			}
		}()
	}
}

// Split is a loop over rows [0, rows) bound once: f(lo, hi) computes
// rows lo..hi-1 and must touch nothing outside them (no cross-row
// reductions). A Split must not run on two goroutines at once (it is
// bound to one output); different ones may.
type Split struct {
	f       func(lo, hi int)
	rows    int
	chunk   int          // rows per chunk
	chunks  int          // chunks to claim
	next    atomic.Int64 // the next chunk to claim
	helpers []helper     // one per worker; none when serial
}

// New binds f to a split of rows across the pool when rows*rowWork (the
// elements touched) is at least parallelMinWork, and to one serial call
// otherwise.
func New(rows, rowWork int, f func(lo, hi int)) *Split {
	pool.once.Do(startPool)
	s := &Split{f: f, rows: rows, chunk: max(rows, 1), chunks: 1}
	parts := min(pool.workers+1, int(limit.Load()))
	if parts < 2 || rows < 2 || rows*rowWork < parallelMinWork {
		return s
	}
	s.chunks = min(rows, parts*chunksPerPart)
	s.chunk = (rows + s.chunks - 1) / s.chunks
	s.chunks = (rows + s.chunk - 1) / s.chunk
	s.helpers = make([]helper, parts-1)
	for i := range s.helpers {
		s.helpers[i] = helper{s: s, done: make(chan struct{}, 1)}
	}
	return s
}

// work claims and computes chunks until none is left.
func (s *Split) work() {
	for {
		c := int(s.next.Add(1) - 1)
		if c >= s.chunks {
			return
		}
		lo := c * s.chunk
		s.f(lo, min(lo+s.chunk, s.rows))
	}
}

// Run computes every row. Resetting the counter and releasing the helpers
// (taken = false) publishes what the caller wrote before run to any
// worker that claims a helper. With the limit at 1 now (SetLimit), the
// helpers are not offered: the caller computes every chunk itself, with
// the same boundaries, so the same results.
func (s *Split) Run() {
	if len(s.helpers) == 0 {
		s.f(0, s.rows)
		return
	}
	s.next.Store(0)
	offer := limit.Load() > 1
	for i := range s.helpers {
		h := &s.helpers[i]
		h.taken.Store(false)
		if !offer {
			continue
		}
		select {
		case pool.jobs <- h:
		default: // the queue is full: this helper stays with the caller
		}
	}
	s.work()
	for i := range s.helpers {
		if h := &s.helpers[i]; !h.taken.CompareAndSwap(false, true) {
			<-h.done // a worker has it: wait for its last chunk
		}
	}
}

// Chunks is how many chunks a run cuts the rows into. Each chunk is one
// call of f, on one goroutine, once per run; ChunkOf(lo) is the chunk of
// the call f(lo, hi), so that a kernel can give each chunk scratch of its
// own (chunks may run side by side, a chunk never on two goroutines).
func (s *Split) Chunks() int { return s.chunks }

// ChunkOf is the chunk whose call is f(lo, ·).
func (s *Split) ChunkOf(lo int) int { return lo / s.chunk }

// Parts is how many goroutines the split may run on: 1 when it is serial.
func (s *Split) Parts() int { return 1 + len(s.helpers) }
