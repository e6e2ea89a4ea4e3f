package sgemm

import "gptlab/internal/par"

// scratch holds the packing buffers of one goroutine's product. Buffers grow
// to the largest block seen and are kept on a free list, so a call allocates
// nothing once warm. The list is a par.Free rather than a sync.Pool: a Pool
// is emptied by garbage collections, which a training step with a
// TapeMachine triggers every step, and the buffers would be reallocated.
type scratch struct {
	a []float32 // packed mc×kc block of A
	b []float32 // packed kc×nc block of B
	t []float32 // one mr×nr tile for edges of C
}

// scratchFree holds idle scratch; more than its capacity of concurrent
// calls allocate the extra scratch and drop it afterwards.
var scratchFree par.Free[scratch]

func getScratch() *scratch {
	if s := scratchFree.Get(); s != nil {
		return s
	}
	return new(scratch)
}

func putScratch(s *scratch) { scratchFree.Put(s) }

// grow makes s large enough for any product with kernel kn: its blocks at
// their largest (mc×kc of A, kc×nc of B, 2.1 MiB in all for AVX-512), not
// the product's. Scratch passes from chunk to chunk of products of every
// shape, in an order the scheduler decides; grown to each product's need
// instead, a scratch met a larger block at a step nobody could predict,
// and a training step that allocates nothing once warm allocated now and
// then (the arena lab's timed steps: one run in ten).
func (s *scratch) grow(kn *kernel) {
	if len(s.a) < kn.mc*kn.kc {
		s.a = make([]float32, kn.mc*kn.kc)
	}
	if len(s.b) < kn.kc*kn.nc {
		s.b = make([]float32, kn.kc*kn.nc)
	}
	if len(s.t) < kn.mr*kn.nr {
		s.t = make([]float32, kn.mr*kn.nr)
	}
}

// roundUp returns x rounded up to a multiple of q.
func roundUp(x, q int) int { return (x + q - 1) / q * q }
