package qgemm

import (
	"sync/atomic"

	"gptlab/internal/par"
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
// computed by group on scratch of its own (par.Chunked); groups are
// claimed by the caller and by the pool's workers. Every group is computed
// exactly as in a serial call, so the result does not depend on the split.
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
}

// RunChunk computes group g.
func (c *call) RunChunk(g int) {
	s := getScratch()
	if c.gemv {
		c.gemvGroup(s, g)
	} else {
		c.dynamicGroup(s, g)
	}
	putScratch(s)
}

// run computes c's groups on the caller and up to t-1 workers; a worker
// busy with other work is not waited for: its share falls to the others.
func (c *call) run(t int) { par.Loop(c, c.groups, t) }
