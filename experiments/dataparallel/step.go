package dataparallel

import (
	"fmt"

	"gptlab/internal/vec"
	"gptlab/models"
	"gptlab/parallel"
)

// The data-parallel step, as DDP runs it: every rank runs the forward and
// backward on its shard of the batch; as the backward makes a parameter's
// gradient final (Model.OnGradReady), the hook copies it, weighted by the
// rank's share of the batch, into its place in a flat gradient laid out
// like Params.Data; the flat gradient is cut into buckets, and a bucket's
// all-reduce starts (AllReduceAsync, on the communicator's own goroutine)
// as soon as its last gradient is in, while the backward goes on. Every
// handle is waited on before the optimizer reads anything.
//
// The flat gradient is the lab's own buffer, outside the arena: the arena
// never reuses its storage, so an all-reduce in flight cannot be
// overwritten by a later op of the step (the planner's happens-before
// edge for buckets staged in arena buffers does not arise here).

// dpBucket is one collective's slice of the flat gradient: elements
// [lo, hi) of the Params.Data layout. A parameter may straddle two
// buckets; a bucket is ready once every parameter it overlaps is.
type dpBucket struct{ lo, hi int }

// dpBuckets cuts a flat gradient of n elements into buckets, from its end
// (the head's gradients are final first: ln_f sits last in Params.Data):
// the first bucket holds at most firstBytes, every other at most
// capBytes, as DDP's bucket_cap_mb with its smaller first bucket. Bucket
// 0 is the last slice of the flat gradient.
func dpBuckets(n, firstBytes, capBytes int) []dpBucket {
	first, rest := max(1, firstBytes/4), max(1, capBytes/4)
	var out []dpBucket
	for hi := n; hi > 0; {
		size := rest
		if len(out) == 0 {
			size = first
		}
		lo := max(0, hi-size)
		out = append(out, dpBucket{lo, hi})
		hi = lo
	}
	return out
}

// dpStepper runs the data-parallel backward of one local model: it stages
// each gradient into flat as the backward makes it final and all-reduces
// the buckets, during the backward (overlap) or after it.
type dpStepper struct {
	c       *parallel.Comm
	m       *models.Model
	flat    []float32 // (n) the staged gradient, laid out like Params.Data
	weight  float32   // this rank's weight: its sequences over the global batch's
	buckets []dpBucket
	overlap bool

	index   map[string]int // parameter name -> its place in Names
	offs    []int          // per parameter: its first element in flat
	touches [][]int        // per parameter: the buckets it overlaps
	waiting []int          // per bucket: parameters still to come this step
	order   []int          // buckets in the order they filled this step
	handles []*parallel.Handle
	staged  int // parameters staged this step
	// toComeAtFirst: gradients the backward had still to make when this
	// step's first all-reduce started (0 when they start after it).
	toComeAtFirst int
}

// newDPStepper prepares the backward of m on c with buckets (none: only
// stage the gradients, for a caller that reduces flat itself). The caller
// routes m's OnGradReady to the stepper's ready.
func newDPStepper(c *parallel.Comm, m *models.Model, buckets []dpBucket, weight float32, overlap bool) *dpStepper {
	p := m.Params()
	s := &dpStepper{c: c, m: m, flat: make([]float32, p.Count()), weight: weight, buckets: buckets, overlap: overlap,
		index: map[string]int{}, waiting: make([]int, len(buckets))}
	for i, name := range p.Names() {
		s.index[name] = i
		lo := p.Offset(name)
		hi := lo + len(p.Slice(name))
		s.offs = append(s.offs, lo)
		var touch []int
		for b, k := range buckets {
			if k.lo < hi && lo < k.hi {
				touch = append(touch, b)
			}
		}
		s.touches = append(s.touches, touch)
	}
	return s
}

// ready is the OnGradReady hook: parameter name's gradient is final.
func (s *dpStepper) ready(name string) {
	i := s.index[name]
	g := s.m.Grad(name)
	vec.Scale(s.flat[s.offs[i]:s.offs[i]+len(g)], g, s.weight) // this rank's weighted share
	s.staged++
	for _, b := range s.touches[i] {
		if s.waiting[b]--; s.waiting[b] == 0 {
			s.order = append(s.order, b)
			if s.overlap {
				s.launch(b)
			}
		}
	}
}

func (s *dpStepper) launch(b int) {
	if len(s.handles) == 0 {
		s.toComeAtFirst = len(s.offs) - s.staged
	}
	s.handles = append(s.handles, s.c.AllReduceAsync(s.flat[s.buckets[b].lo:s.buckets[b].hi]))
}

// backward runs the forward and backward of the local batch (idx, tgt:
// (B, T) each) and reduces the buckets; when it returns without error,
// flat holds the sum over ranks of the weighted gradients in every
// bucket (and this rank's weighted gradient where no bucket is).
func (s *dpStepper) backward(idx, tgt []int32) (float32, error) {
	for b := range s.buckets {
		s.waiting[b] = 0
	}
	for _, t := range s.touches {
		for _, b := range t {
			s.waiting[b]++
		}
	}
	s.order, s.handles, s.staged = s.order[:0], s.handles[:0], 0
	loss, err := s.m.Step(idx, tgt)
	if err == nil && (s.staged != len(s.offs) || len(s.order) != len(s.buckets)) {
		err = fmt.Errorf("data-parallel: %d of %d gradients and %d of %d buckets came in during the backward",
			s.staged, len(s.offs), len(s.order), len(s.buckets))
	}
	if err == nil && !s.overlap {
		for _, b := range s.order { // the same collectives in the same order, after the backward
			s.launch(b)
		}
	}
	for _, h := range s.handles { // nothing reads flat before every reduction is done
		if werr := h.Wait(); werr != nil && err == nil {
			err = werr
		}
	}
	return loss, err
}
