// Package par runs a loop over rows on a small pool of long-lived worker
// goroutines, with fixed chunk boundaries and no allocation per run, for
// the kernels of the model and of the arena executor; package sgemm hands
// its products' chunks to the same pool (Offer), so that one process has
// one set of workers. It owns the pool and the waiting (Latch), not the
// kernels, nor how a product is cut.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The row-parallel kernels share a small pool of long-lived worker
// goroutines (one fewer than GOMAXPROCS, at most MaxParts-1), started on
// first use. Neither a worker nor a caller parks while work comes
// quickly: each polls for spinFor first (see there and Latch). A kernel bound to fixed storage cuts its rows once, at
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
// one usable CPU: nothing is ever split). The pool grows to GOMAXPROCS-1
// (at most MaxParts-1) when asked for more; it never shrinks.
func Workers() int { return ensureWorkers(runtime.GOMAXPROCS(0) - 1) }

// parallelMinWork is the work (elements touched) below which a kernel
// runs on the calling goroutine: handing work to a worker costs a few
// microseconds.
const parallelMinWork = 1 << 16

// spinFor is how long a worker that has just run a task keeps polling the
// queue before it parks. A parked worker's wake-up goes through the
// operating system (and on a virtual machine through the hypervisor): it
// was measured at a few hundred microseconds on a 2-vCPU machine here,
// longer than a chunk of most products, so without the spin a second core
// took about a quarter of a 768×512×128 product's chunks and bought 1.05-
// 1.3x. A training step offers work every few tens of microseconds, so a
// spinning worker catches the next task; a pool that gets none for spinFor
// parks and costs nothing.
const spinFor = 200 * time.Microsecond

// Task is work offered to the pool: a worker that receives it calls
// RunTask once. An offered task may be received late, after its caller
// has finished the work itself: RunTask must then return at once (the
// kernels' atomic chunk counters make it so).
type Task interface{ RunTask() }

// helper is a worker's share of one split kernel.
type helper struct {
	s     *Split
	taken atomic.Bool // claimed, by a worker or the caller, this run
	done  *Latch      // a worker that ran the helper says so
}

// RunTask runs the helper's share unless the caller has taken it back: a
// helper may be offered again before an earlier offer is received, and
// only the first claim of a run counts.
func (h *helper) RunTask() {
	if h.taken.CompareAndSwap(false, true) {
		h.s.work()
		h.done.Done()
	}
}

var pool struct {
	jobs    chan Task
	mu      sync.Mutex
	workers atomic.Int64
}

func init() { pool.jobs = make(chan Task, 64) }

// ensureWorkers starts workers until there are n (at most MaxParts-1) and
// returns how many there are.
func ensureWorkers(n int) int {
	n = min(n, MaxParts-1)
	if w := int(pool.workers.Load()); w >= n {
		return w
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for int(pool.workers.Load()) < n {
		go worker()
		pool.workers.Add(1)
	}
	return n
}

// worker runs tasks for the life of the process.
func worker() {
	for {
		next().RunTask()
	}
}

// next receives the next task: polling the queue for spinFor, then parked.
func next() Task {
	var t Task
	if spinUntil(func() bool {
		select {
		case t = <-pool.jobs:
			return true
		default:
			return false
		}
	}) {
		return t
	}
	return <-pool.jobs
}

// Offer hands t to the pool without blocking and reports whether the pool
// took it (false when its queue is full).
func Offer(t Task) bool {
	select {
	case pool.jobs <- t:
		return true
	default:
		return false
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
	s := &Split{f: f, rows: rows, chunk: max(rows, 1), chunks: 1}
	parts := min(Workers()+1, int(limit.Load()))
	if parts < 2 || rows < 2 || rows*rowWork < parallelMinWork {
		return s
	}
	s.chunks = min(rows, parts*chunksPerPart)
	s.chunk = (rows + s.chunks - 1) / s.chunks
	s.chunks = (rows + s.chunk - 1) / s.chunk
	s.helpers = make([]helper, parts-1)
	for i := range s.helpers {
		s.helpers[i] = helper{s: s, done: NewLatch()}
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
		h.done.Reset()
		h.taken.Store(false)
		if !offer {
			continue
		}
		Offer(h) // if the queue is full, this helper stays with the caller
	}
	s.work()
	for i := range s.helpers {
		if h := &s.helpers[i]; !h.taken.CompareAndSwap(false, true) {
			h.done.Wait() // a worker has it: wait for its last chunk
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
