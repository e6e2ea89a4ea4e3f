package par

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSplitCoversEveryRowOnce: every row is computed exactly once, run
// after run, whatever the size, and small loops stay serial.
func TestSplitCoversEveryRowOnce(t *testing.T) {
	for _, tc := range []struct {
		rows, rowWork int
		split         bool
	}{
		{0, 1 << 20, false},
		{1, 1 << 20, false},
		{7, 16, false}, // below parallelMinWork
		{7, 1 << 14, true},
		{768, 512, true},
		{1000, 1 << 10, true},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.rowWork), func(t *testing.T) {
			hits := make([]int, tc.rows)
			var mu sync.Mutex
			chunks := 0
			var s *Split
			seen := map[int]int{} // chunk -> its lo
			s = New(tc.rows, tc.rowWork, func(lo, hi int) {
				mu.Lock()
				chunks++
				c := s.ChunkOf(lo)
				if prev, ok := seen[c]; (ok && prev != lo) || c < 0 || c >= s.Chunks() {
					t.Errorf("rows %d..%d: chunk %d of %d (seen at row %d)", lo, hi, c, s.Chunks(), prev)
				}
				seen[c] = lo
				mu.Unlock()
				for r := lo; r < hi; r++ {
					hits[r]++ // rows are disjoint between chunks: no race
				}
			})
			if got := s.Parts() > 1; Workers() > 0 && got != tc.split {
				t.Errorf("Parts() = %d, want split %v", s.Parts(), tc.split)
			}
			for run := 1; run <= 3; run++ {
				s.Run()
				for r, h := range hits {
					if h != run {
						t.Fatalf("run %d: row %d computed %d times, want %d", run, r, h, run)
					}
				}
			}
			if tc.split && Workers() > 0 && chunks <= 3 {
				t.Errorf("%d chunks in 3 runs: the rows were not cut", chunks)
			}
		})
	}
}

// TestSetLimitAtRun: a limit of 1 set after a split was made runs it on
// its caller alone (no two chunks at once), every row once, in the same
// chunks; raised again, the split runs on the pool again.
func TestSetLimitAtRun(t *testing.T) {
	if Workers() == 0 {
		t.Skip("one usable CPU: nothing is ever split")
	}
	var inFlight, most atomic.Int64
	hits := make([]atomic.Int64, 4096)
	s := New(len(hits), 1<<10, func(lo, hi int) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(200 * time.Microsecond) // long enough for a worker to overlap it
		for r := lo; r < hi; r++ {
			hits[r].Add(1)
		}
		inFlight.Add(-1)
	})
	prev := SetLimit(1)
	s.Run()
	SetLimit(prev)
	if m := most.Load(); m != 1 {
		t.Errorf("limit 1: %d chunks ran at once, want 1", m)
	}
	for r := range hits {
		if h := hits[r].Load(); h != 1 {
			t.Fatalf("limit 1: row %d computed %d times", r, h)
		}
	}
	for range 20 { // the negative control: with the limit back, the pool takes chunks
		s.Run()
		if most.Load() > 1 {
			return
		}
	}
	t.Errorf("limit %d: no two chunks ever ran at once in 20 runs", prev)
}

// TestSetLimit: a limit of 1 makes every split made afterwards serial.
func TestSetLimit(t *testing.T) {
	prev := SetLimit(1)
	s := New(768, 512, func(lo, hi int) {})
	SetLimit(prev)
	if s.Parts() != 1 {
		t.Errorf("with limit 1: Parts() = %d, want 1", s.Parts())
	}
	if Workers() > 0 {
		if s := New(768, 512, func(lo, hi int) {}); s.Parts() < 2 {
			t.Errorf("limit restored to %d: Parts() = %d, want >= 2", prev, s.Parts())
		}
	}
}

func ExampleNew() {
	x := make([]float32, 1024*256)
	// bound once: each run doubles every row, on as many goroutines as the
	// pool offers, in the same fixed chunks every time.
	s := New(1024, 256, func(lo, hi int) {
		for i := lo * 256; i < hi*256; i++ {
			x[i] = 2*x[i] + 1
		}
	})
	s.Run()
	s.Run()
	fmt.Println(x[0], x[len(x)-1])
	// Output: 3 3
}

// counted is chunked work that counts each chunk's runs.
type counted struct{ hits []atomic.Int64 }

func (c *counted) RunChunk(i int) { c.hits[i].Add(1) }

// TestLoopRunsEveryChunkOnce: run after run, every chunk runs exactly
// once before Loop returns, on any number of goroutines.
func TestLoopRunsEveryChunkOnce(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 100} {
		for _, threads := range []int{1, 2, 4} {
			w := &counted{hits: make([]atomic.Int64, n)}
			for run := int64(1); run <= 50; run++ {
				Loop(w, n, threads)
				for i := range w.hits {
					if h := w.hits[i].Load(); h != run {
						t.Fatalf("n %d, %d threads, run %d: chunk %d ran %d times", n, threads, run, i, h)
					}
				}
			}
		}
	}
}

// byGoroutine records which goroutine ran each chunk (its id from
// runtime.Stack), each chunk slowed so that the workers take some.
type byGoroutine struct {
	mu  sync.Mutex
	ran []uint64
}

func goroutineID() uint64 {
	var buf [64]byte
	var id uint64
	fmt.Sscanf(string(buf[:runtime.Stack(buf[:], false)]), "goroutine %d", &id)
	return id
}

func (g *byGoroutine) RunChunk(c int) {
	time.Sleep(50 * time.Microsecond)
	g.mu.Lock()
	g.ran[c] = goroutineID()
	g.mu.Unlock()
}

// TestLoopCallerTakesTheFront: the caller runs a prefix of the chunks and
// the workers the rest, so a core gets the same part of the range from
// loop to loop (loop.work); one counter claimed in order would interleave
// them.
func TestLoopCallerTakesTheFront(t *testing.T) {
	if Workers() == 0 {
		t.Skip("one usable CPU: Loop runs every chunk on the caller")
	}
	me := goroutineID()
	helped := false
	for range 20 {
		g := &byGoroutine{ran: make([]uint64, 40)}
		Loop(g, len(g.ran), 2)
		k := 0
		for k < len(g.ran) && g.ran[k] == me {
			k++
		}
		for c := k; c < len(g.ran); c++ {
			if g.ran[c] == me {
				t.Fatalf("the caller ran chunks 0..%d and chunk %d, not a prefix: %v", k-1, c, g.ran)
			}
		}
		helped = helped || k < len(g.ran)
	}
	if !helped {
		t.Log("no worker took a chunk in 20 loops (a busy machine): the prefix held trivially")
	}
}

// streamTask waits for a flag, then says it is done.
type streamTask struct{ flag, done atomic.Bool }

func (s *streamTask) RunTask() {
	Await(s.flag.Load)
	s.done.Store(true)
}

// countChunks sleeps in each chunk and counts it.
type countChunks struct{ n atomic.Int64 }

func (c *countChunks) RunChunk(int) {
	time.Sleep(100 * time.Microsecond)
	c.n.Add(1)
}

// TestStartAwait: a started stream runs beside the caller, and while it
// waits it runs chunks of the caller's loops; the caller's Await returns
// once the stream has finished.
func TestStartAwait(t *testing.T) {
	if Workers() == 0 {
		t.Skip("one usable CPU: no stream runs beside the caller")
	}
	var s streamTask
	if !Start(&s) {
		t.Fatal("Start refused with a worker in the pool")
	}
	// The caller's loop: the waiting stream should take some chunks.
	helped := false
	for range 50 {
		var c countChunks
		l := new(loop)
		l.run(&c, 64, 1)
		if c.n.Load() != 64 {
			t.Fatalf("%d of 64 chunks ran", c.n.Load())
		}
		// The seat's latch is set only by a worker that took it.
		helped = l.seats[0].done.done.Load()
		if helped {
			break
		}
	}
	s.flag.Store(true)
	Await(s.done.Load)
	if !helped {
		t.Error("the waiting stream never ran a chunk of the caller's loop")
	}
}

// TestLoopSerialUnderLimit: with the limit at 1 a loop runs on its caller
// alone, in order.
func TestLoopSerialUnderLimit(t *testing.T) {
	prev := SetLimit(1)
	defer SetLimit(prev)
	var order []int
	Loop(chunkFunc(func(c int) { order = append(order, c) }), 8, 4)
	if fmt.Sprint(order) != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("chunks ran as %v, want in order on the caller", order)
	}
}

type chunkFunc func(int)

func (f chunkFunc) RunChunk(c int) { f(c) }
