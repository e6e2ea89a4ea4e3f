package par

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Workers grows the pool to GOMAXPROCS-1 and returns the number of its
// goroutines, the callers aside (0 with one usable CPU: nothing is ever
// split). The pool never shrinks.
func Workers() int { return ensureWorkers(runtime.GOMAXPROCS(0) - 1) }

// spinFor is how long a worker that has just run a task keeps polling the
// queue on the processor before it naps (see idleFor), and a waiting
// caller or stream before it naps (Latch, Await). A parked or sleeping
// worker's wake-up goes through the operating system (and on a virtual
// machine through the hypervisor): it was measured at a few hundred
// microseconds on a 2-vCPU machine here, longer than a chunk of most
// products, so with workers parked on a channel a second core took about
// a quarter of a 768×512×128 product's chunks and bought 1.05-1.3x. A
// training step offers work every few tens of microseconds, so a spinning
// worker catches the next task. The naps after the spin double, so a wait
// that outlasts the spin wakes up to twice late: a stream of a halved
// step waits 0.3-1.4 ms for the other at the loss and at the end (the
// baby step's timelines), and with 200 µs of spin its step took 1.03x
// the time it takes with 2 ms, under f32 and bf16 alike (medians of 8
// farm-bench pairs on a 2-vCPU Zen 5).
const spinFor = 2 * time.Millisecond

// task is work offered to the pool: a worker that receives it calls
// RunTask once. An offered task may be received late, after its caller
// has finished the work itself: RunTask must then return at once (a
// loop's seat, taken back by the caller, makes it so).
type task interface{ RunTask() }

var pool struct {
	jobs    chan task // seats of loops (Loop)
	long    chan task // streams (Start): never run by a helping wait
	mu      sync.Mutex
	workers atomic.Int64
}

func init() {
	pool.jobs = make(chan task, 64)
	pool.long = make(chan task, 8)
}

// ensureWorkers starts workers until there are n and returns how many
// there are.
func ensureWorkers(n int) int {
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

// idleFor is how long, in naps, a worker that has spun for spinFor with
// no task goes on polling before it parks on the queue: parking takes the
// runtime's wait records (see Latch), so a worker parks only once the
// process has had nothing to split for a while, not between two steps.
const idleFor = 20 * time.Millisecond

// next receives the next task, a loop's seat or a stream: polling the
// queues for spinFor, then between naps for idleFor, then parked.
func next() task {
	var t task
	// Two receives, not one select of both: a receive that finds its
	// queue empty returns without taking the queue's lock, and a select
	// of two cases locks both every time, so an idle worker polling
	// contended with every offer: on a Zen 5 the poll's select took 3.6%
	// of the baby step's CPU time on two cores (pprof, one stream), and
	// the offers and free lists waiting on the locks it held 4% more.
	poll := func() bool {
		select {
		case t = <-pool.jobs:
			return true
		default:
		}
		select {
		case t = <-pool.long:
			return true
		default:
			return false
		}
	}
	if spinUntil(poll) || napUntil(poll, idleFor) {
		return t
	}
	select {
	case t = <-pool.jobs:
	case t = <-pool.long:
	}
	return t
}

// offer hands t to the pool without blocking and reports whether the pool
// took it (false when its queue is full).
func offer(t task) bool {
	select {
	case pool.jobs <- t:
		return true
	default:
		return false
	}
}
