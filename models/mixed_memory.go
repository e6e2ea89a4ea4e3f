package models

import (
	"fmt"
	"math"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
	"gptlab/precision"
)

// StepMemory is what a training step's planned arena holds. The moment
// that matters is the start of the backward (the first op that reads the
// loss's gradient): every value live then was made by the forward and is
// kept for the backward or for the caller.
type StepMemory struct {
	Peak int64 // the planned arena: the step's whole peak
	// Saved is the planned bytes of the values live as the backward starts
	// that an op of the backward reads: the activations kept for it (under
	// a 16-bit policy, their 16-bit copies; any float32 value the forward
	// kept would count here too). The weights' 16-bit copies are not in
	// it (WeightCopies).
	Saved int64
	// SavedRun is the same values' storage as the arena binds it for the
	// run: the bytes of their typed buffers (2 an element for bf16 and
	// fp16).
	SavedRun int64
	// Saved16 is the part of SavedRun in 16-bit buffers.
	Saved16 int64
	// Kept is the rest of what is live as the backward starts: what the
	// caller reads after the step (the logits, the loss) and no backward
	// op does.
	Kept int64
	// WeightCopies is the planned bytes of the weights' 16-bit copies (as
	// the matrix products read them), made from the float32 master weights
	// each step and kept for the backward's products.
	WeightCopies int64
	// Master is the float32 parameters (outside the arena); AdamW's two
	// moments take twice as much again, in every policy.
	Master int64
}

// Memory measures a training model's step (built on the arena executor):
// the planned bytes, and the saved activations' typed storage in the
// arena the steps run from.
func (m *Model) Memory() (StepMemory, error) {
	p := m.Arena()
	if p == nil || !m.train {
		return StepMemory{}, fmt.Errorf("%w: step memory needs a training model on the arena executor", ErrConfig)
	}
	prob, _ := p.Problem()
	mem := StepMemory{Peak: p.Stats().ArenaBytes, Master: 4 * int64(m.params.Count())}
	start, err := m.backwardStart()
	if err != nil {
		return StepMemory{}, err
	}
	// owner: one node per planned buffer; readAfter: buffers an op at or
	// after start reads; copies: the weights' 16-bit copies.
	owner := map[int]*G.Node{}
	readAfter, copies := map[int]bool{}, map[int]bool{}
	for _, n := range m.g.AllNodes() {
		b, ok := p.BufferOf(n)
		if !ok {
			continue
		}
		if _, seen := owner[b]; !seen {
			owner[b] = n
		}
		if m.mp != nil && m.mp.copies[n] {
			copies[b] = true
		}
		s, scheduled := p.StepOf(n)
		if !scheduled || s < start {
			continue
		}
		for _, c := range children(n) {
			if cb, ok := p.BufferOf(c); ok {
				readAfter[cb] = true
			}
		}
	}
	for b, buf := range prob.Buffers {
		if !(buf.Start < int64(start) && int64(start) < buf.End) {
			continue
		}
		switch {
		case copies[b]:
			mem.WeightCopies += buf.Size
		case readAfter[b]:
			mem.Saved += buf.Size
			if v, ok := p.Buf(owner[b]); ok {
				n := int64(len(v.Bytes()))
				mem.SavedRun += n
				if v.Dtype == arena.BF16 || v.Dtype == arena.FP16 {
					mem.Saved16 += n
				}
			}
		default:
			mem.Kept += buf.Size
		}
	}
	return mem, nil
}

// backwardStart is the schedule position of the first op that reads the
// loss's gradient (the dloss input), directly or not.
func (m *Model) backwardStart() (int, error) {
	p := m.Arena()
	seed := m.g.ByName("dloss")
	if len(seed) == 0 {
		return 0, fmt.Errorf("%w: the graph has no dloss input", ErrConfig)
	}
	start := math.MaxInt
	seen := map[*G.Node]bool{}
	stack := G.Nodes{seed[0]}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for it := m.g.To(n.ID()); it.Next(); {
			r := it.Node().(*G.Node)
			if seen[r] {
				continue
			}
			seen[r] = true
			if s, ok := p.StepOf(r); ok {
				start = min(start, s)
			}
			stack = append(stack, r)
		}
	}
	if start == math.MaxInt {
		return 0, fmt.Errorf("%w: no op of the step reads dloss", ErrConfig)
	}
	return start, nil
}

// SetLossScale sets the seed of a training model's backward, the
// gradient of the loss (1 by default): with s, every gradient of the next
// Step is s times the loss's (dynamic loss scaling); the loss itself is
// not scaled.
func (m *Model) SetLossScale(s float32) error {
	seed := m.g.ByName("dloss")
	if !m.train || len(seed) == 0 {
		return fmt.Errorf("%w: a loss scale needs a training model", ErrConfig)
	}
	d, ok := seed[0].Value().(*tensor.Dense)
	if !ok || d.Dtype() != tensor.Float32 || d.Len() != 1 {
		return fmt.Errorf("%w: the dloss input is not one float32", ErrConfig)
	}
	d.Float32s()[0] = s
	return nil
}

// Underflow counts what the backward's casts of gradients to a 16-bit
// format did to the values they rounded, over the steps it was active.
type Underflow struct {
	Active  bool  // count during the next Steps (set and cleared by the caller)
	Values  int64 // gradient values cast to 16 bits
	Nonzero int64 // of those, values not zero in float32
	Flushed int64 // of those, values the cast made zero (below half the smallest subnormal)
}

// Share is Flushed / Nonzero (0 when nothing was counted).
func (u *Underflow) Share() float64 {
	if u.Nonzero == 0 {
		return 0
	}
	return float64(u.Flushed) / float64(u.Nonzero)
}

// WatchUnderflow makes every later Step of a training model built under a
// 16-bit policy count, while u.Active, what each cast of a gradient down
// to the storage format flushed to zero: read in the arena right after
// the cast is written, its float32 input still live beside it; for a
// cast the program runs as its op's output rounded in place (a round
// trip, arena.Program.WhenRounding), the op's output just before it is
// rounded, each value narrowed as the cast would. It fails for a model
// without such casts (a float32 policy).
func (m *Model) WatchUnderflow(u *Underflow) error {
	p := m.Arena()
	if p == nil || !m.train || m.mp == nil {
		return fmt.Errorf("%w: underflow is counted in a training model with a 16-bit policy on the arena executor", ErrConfig)
	}
	seed := m.g.ByName("dloss")[0]
	var casts, ins, trips G.Nodes
	for _, n := range m.g.AllNodes() {
		op, ok := n.Op().(arena.CastOp)
		if !ok || n.ID() <= seed.ID() || op.From != arena.F32 {
			continue // made by the backward, so a gradient's
		}
		if _, scheduled := p.StepOf(n); scheduled {
			casts = append(casts, n)
			ins = append(ins, children(n)[0])
		} else if src := children(n)[0]; p.RoundsInPlace(src) {
			trips = append(trips, src)
		}
	}
	if len(casts)+len(trips) == 0 {
		return fmt.Errorf("%w: the backward casts no gradient", ErrConfig)
	}
	// count adds one cast's figures to u; the casts of a program on two
	// streams run on both, so the sums are taken under mu.
	var mu sync.Mutex
	count := func(x []float32, narrowed func(j int) uint16) {
		var nonzero, flushed int64
		for j, v := range x {
			if v != 0 {
				nonzero++
				if narrowed(j)&0x7fff == 0 {
					flushed++
				}
			}
		}
		mu.Lock()
		u.Values += int64(len(x))
		u.Nonzero += nonzero
		u.Flushed += flushed
		mu.Unlock()
	}
	if err := p.WhenRounding(trips, func(i int) {
		if !u.Active {
			return
		}
		x := p.Value(trips[i]).Data().([]float32)
		count(x, func(j int) uint16 { return precision.ToBF16(x[j]) })
	}); err != nil {
		return err
	}
	return p.WhenWritten(casts, func(i int) {
		if !u.Active {
			return
		}
		out, _ := p.Buf(casts[i])
		in, _ := p.Buf(ins[i])
		count(in.F32, func(j int) uint16 { return out.U16[j] })
	})
}
