// Package par runs work on a small pool of long-lived worker goroutines,
// with no allocation per run: Split, a loop over rows bound once to fixed
// storage with fixed chunk boundaries, for the kernels of the model and
// of the arena executor; and Loop, any chunked work, with which packages
// sgemm, bf16gemm and qgemm split their products, so that a process has
// one set of workers. It owns the pool, the claiming of chunks and the
// waiting (Latch); not the kernels, nor how a product is cut.
package par

import "sync/atomic"

// The pool grows to as many workers as a Loop asks for (callers ask for at
// most GOMAXPROCS-1), started on first use. Running a Loop offers it to
// the pool, then the caller and whichever workers pick it up claim chunks
// from one atomic word until none is left, the caller from the front and
// the workers from the back (so each core gets about the same part of
// every loop's range, and its caches the rows it wrote before); the
// caller then waits only for the chunks in flight on a worker. On a
// machine whose other cores are busy the caller simply does most of the
// work itself instead of waiting for a descheduled worker. Neither a
// worker nor a waiting caller parks while work comes quickly: each polls
// for spinFor first (see there and Latch).
// A Split cuts its rows once, at bind time, into a few chunks per CPU;
// every row is computed by exactly one goroutine, in a fixed order of
// summation, with fixed chunk boundaries, so results never depend on the
// split or on who ran what.

// MaxParts bounds the goroutines one Split runs on.
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

// parallelMinWork is the work (elements touched) below which a kernel
// runs on the calling goroutine: handing work to a worker costs a few
// microseconds.
const parallelMinWork = 1 << 16

// Split is a loop over rows [0, rows) bound once: f(lo, hi) computes
// rows lo..hi-1 and must touch nothing outside them (no cross-row
// reductions). A Split must not run on two goroutines at once (it is
// bound to one output); different ones may.
type Split struct {
	f      func(lo, hi int)
	rows   int
	chunk  int // rows per chunk
	chunks int // chunks to claim
	parts  int // goroutines to run on: 1 when serial
}

// New binds f to a split of rows across the pool when rows*rowWork (the
// elements touched) is at least parallelMinWork, and to one serial call
// otherwise.
func New(rows, rowWork int, f func(lo, hi int)) *Split {
	s := &Split{f: f, rows: rows, chunk: max(rows, 1), chunks: 1, parts: 1}
	parts := min(Workers()+1, int(limit.Load()))
	if parts < 2 || rows < 2 || rows*rowWork < parallelMinWork {
		return s
	}
	s.chunks = min(rows, parts*chunksPerPart)
	s.chunk = (rows + s.chunks - 1) / s.chunks
	s.chunks = (rows + s.chunk - 1) / s.chunk
	s.parts = parts
	return s
}

// RunChunk computes chunk c's rows (Chunked).
func (s *Split) RunChunk(c int) {
	lo := c * s.chunk
	s.f(lo, min(lo+s.chunk, s.rows))
}

// Run computes every row. With the limit at 1 now (SetLimit), the caller
// computes every chunk itself, with the same boundaries, so the same
// results.
func (s *Split) Run() {
	if s.parts == 1 {
		s.f(0, s.rows)
		return
	}
	t := s.parts
	if limit.Load() <= 1 {
		t = 1
	}
	Loop(s, s.chunks, t)
}

// Chunks is how many chunks a run cuts the rows into. Each chunk is one
// call of f, on one goroutine, once per run; ChunkOf(lo) is the chunk of
// the call f(lo, hi), so that a kernel can give each chunk scratch of its
// own (chunks may run side by side, a chunk never on two goroutines).
func (s *Split) Chunks() int { return s.chunks }

// ChunkOf is the chunk whose call is f(lo, ·).
func (s *Split) ChunkOf(lo int) int { return lo / s.chunk }

// Parts is how many goroutines the split may run on: 1 when it is serial.
func (s *Split) Parts() int { return s.parts }
