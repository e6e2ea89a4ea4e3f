package sgemm

import (
	"runtime"
	"sync/atomic"

	"gptlab/internal/par"
)

var (
	maxThreads  atomic.Int64 // 0: GOMAXPROCS
	minParFlops atomic.Int64
)

func init() { minParFlops.Store(DefaultParallelFlops) }

// DefaultParallelFlops is the default of SetParallelFlops: below about
// 4 MFLOP (a 128×128×128 product) handing work to another goroutine costs
// more than it saves.
const DefaultParallelFlops = 4 << 20

// SetThreads sets how many goroutines one Sgemm call may use; n <= 0 means
// GOMAXPROCS (the default). It returns the previous setting.
func SetThreads(n int) int {
	return int(maxThreads.Swap(int64(max(n, 0))))
}

// Threads returns how many goroutines a large Sgemm call uses now.
func Threads() int {
	t := int(maxThreads.Load())
	if g := runtime.GOMAXPROCS(0); t <= 0 || t > g {
		t = g
	}
	return t
}

// SetParallelFlops sets the size, in floating-point operations (2·m·n·k),
// from which a call is split across goroutines. It returns the previous
// setting.
func SetParallelFlops(flops int) int {
	return int(minParFlops.Swap(int64(flops)))
}

// threadsFor returns how many goroutines to use for an m×n×k product: each
// must get at least one full tile row or column block.
func threadsFor(kn *kernel, m, n, k int) int {
	t := Threads()
	if t <= 1 || 2*int64(m)*int64(n)*int64(k) < minParFlops.Load() {
		return 1
	}
	return min(t, max(m/kn.mr, n/kn.nr))
}

// chunksPerThread is how many chunks a parallel product is cut into per
// goroutine. Chunks are claimed dynamically, so when another process holds
// a core (the machine is shared) the caller takes over the chunks a
// descheduled worker has not started; each chunk packs its own panels of
// B (row chunks) or rereads A (column chunks), the price of more than one
// chunk per goroutine.
const chunksPerThread = 2

// job is one parallel product cut into chunks (par.Chunked).
type job struct {
	p      problem
	byRows bool // chunks are blocks of rows (else of columns)
	step   int  // rows or columns per chunk
	size   int  // m or n
}

// jobFree holds idle jobs (see scratchFree).
var jobFree = make(chan *job, 16)

// RunChunk computes chunk c of the product on scratch of its own.
func (j *job) RunChunk(c int) {
	lo := c * j.step
	hi := min(lo+j.step, j.size)
	var part problem
	if j.byRows {
		part = j.p.rows(lo, hi)
	} else {
		part = j.p.cols(lo, hi)
	}
	s := getScratch()
	part.run(s)
	putScratch(s)
}

// parallel cuts p into about chunksPerThread·t chunks along M or N and runs
// them on the caller and on up to t-1 workers of package par's pool.
func parallel(p *problem, t int) {
	var j *job
	select {
	case j = <-jobFree:
	default:
		j = new(job)
	}
	// Chunks of rows each pack all of B (k×n), chunks of columns each read
	// all of A (k×m): cut along M when it is the much larger side or N
	// has too few tiles.
	n := t * chunksPerThread
	j.byRows = p.m/p.kern.mr >= n && (p.m >= 2*p.n || p.n/p.kern.nr < n)
	j.size, j.step = p.n, p.kern.nr
	if j.byRows {
		j.size, j.step = p.m, p.kern.mr
	}
	j.step = roundUp((j.size+n-1)/n, j.step)
	j.p = *p
	par.Loop(j, (j.size+j.step-1)/j.step, t)
	// every chunk has run and no worker holds j now
	j.p = problem{}
	select {
	case jobFree <- j:
	default:
	}
}
