package qgemm

import (
	"sync"
	"sync/atomic"

	"gptlab/internal/sgemm"
)

// minParOps is the size (2·M·N·K) from which Dynamic and WeightOnly's GEMV
// split their panels across goroutines: below it handing work over costs
// more than it saves (sgemm's threshold).
var minParOps atomic.Int64

func init() { minParOps.Store(sgemm.DefaultParallelFlops) }

// threadsFor is how many goroutines to use for an m×N×K product over np
// panel groups: as many as sgemm uses (sgemm.Threads, so float32 and int8
// compare on the same cores), at most one per group.
func threadsFor(m, n, k, groups int) int {
	t := sgemm.Threads()
	if t <= 1 || 2*int64(m)*int64(n)*int64(k) < minParOps.Load() {
		return 1
	}
	return min(t, groups)
}

// call is one Dynamic or GEMV call split into groups of panels, each
// computed by group on the claimer's scratch; groups are claimed from
// next by the caller and by helpers. Every group is computed exactly as
// in a serial call, so the result does not depend on the split.
type call struct {
	gemv   bool
	k      *kernel
	w      *Weights
	y      []float32
	x      []float32 // gemv: the padded row
	a      []byte    // dynamic: the quantized rows
	sx     []float32
	m      int
	mr, nv int // largest tile
	groups int
	next   atomic.Int64
	wg     sync.WaitGroup
}

func (c *call) work(s *scratch) {
	for {
		g := int(c.next.Add(1)) - 1
		if g >= c.groups {
			return
		}
		if c.gemv {
			c.gemvGroup(s, g)
		} else {
			c.dynamicGroup(s, g)
		}
	}
}

// The helpers: long-lived goroutines, each with its own scratch, started
// on first use.
var (
	helperOnce  sync.Once
	helperCalls chan *call
)

// maxHelpers bounds the helper goroutines.
const maxHelpers = 7

func startHelpers() {
	helperCalls = make(chan *call)
	for range maxHelpers {
		go func() {
			s := new(scratch)
			for c := range helperCalls {
				c.work(s)
				c.wg.Done()
			}
		}()
	}
}

// run computes c's groups on the caller's scratch s and up to t-1
// helpers; a helper busy with another call is not waited for: its share
// falls to the others.
func (c *call) run(s *scratch, t int) {
	c.next.Store(0)
	if t > 1 {
		helperOnce.Do(startHelpers)
		for range min(t-1, maxHelpers) {
			c.wg.Add(1)
			select {
			case helperCalls <- c:
			default:
				c.wg.Done()
			}
		}
	}
	c.work(s)
	c.wg.Wait()
}
