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
	pack   packJob
}

// jobFree holds idle jobs (see scratchFree).
var jobFree par.Free[job]

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
	j := jobFree.Get()
	if j == nil {
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
	var shared *scratch
	if j.byRows {
		shared = j.packSharedB(t)
	}
	par.Loop(j, (j.size+j.step-1)/j.step, t)
	// every chunk has run and no worker holds j now
	if shared != nil {
		putScratch(shared)
	}
	j.p = problem{}
	jobFree.Put(j)
}

// packSharedB packs all of op(B) once, across t goroutines, into scratch
// of its own, and points j.p.packed at it, so that the row chunks share
// one packing instead of each packing all of B again (the four chunks of
// a 768×128×512 product on two threads packed its 256 KiB four times).
// The panels are the ones each chunk would pack, so the products are
// bitwise the same. It returns the scratch to put back once the chunks have run, or nil
// (nothing shared) when the product gets its B from a PackB, spans more
// than one block of columns, or B is too small to gain (sharedPackMin) or
// too large for the scratch's B buffer.
func (j *job) packSharedB(t int) *scratch {
	p := &j.p
	kn := p.kern
	size := roundUp(p.n, kn.nr) * p.k
	if p.pack != nil || p.readsB() || p.n > kn.nc || size > kn.kc*kn.nc || size < sharedPackMin {
		return nil
	}
	s := getScratch()
	s.grow(kn)
	j.pack = packJob{p: p, dst: s.b, lastW: kn.lastWidth(p.n), groups: t}
	j.pack.gw = roundUp((p.n+t-1)/t, kn.nr)
	blocks := (p.k + kn.kc - 1) / kn.kc
	par.Loop(&j.pack, blocks*t, t)
	j.pack = packJob{}
	p.packed = s.b
	return s
}

// sharedPackMin is the size of packed B (floats) below which packSharedB
// leaves each chunk to pack it: its extra round on the pool costs about
// what packing a small B three more times does (768×65×128, 12 Ki floats,
// ran 4% slower shared; 768×128×512, 64 Ki, 5% faster).
const sharedPackMin = 32 << 10

// packJob packs B for packSharedB: chunk c is depth block c/groups,
// columns of group c%groups.
type packJob struct {
	p      *problem
	dst    []float32
	lastW  int // the last panel's width (kernel.lastWidth of n)
	groups int // groups of columns a depth block
	gw     int // columns a group, a multiple of nr
}

// RunChunk packs chunk c's panels where the driver reads them (run).
func (pj *packJob) RunChunk(c int) {
	p, kn := pj.p, pj.p.kern
	pc, j0 := c/pj.groups*kn.kc, c%pj.groups*pj.gw
	j1 := min(j0+pj.gw, p.n)
	if j0 >= j1 {
		return
	}
	kb := min(kn.kc, p.k-pc)
	w := kn.nr // panels before the last are full
	if j1 == p.n {
		w = pj.lastW
	}
	p.packB(pj.dst[pc*roundUp(p.n, kn.nr)+(j0/kn.nr)*kb*kn.nr:], kn.nr, w, pc, j0, kb, j1-j0)
}
