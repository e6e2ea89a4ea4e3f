package models

import (
	"fmt"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/models/ops"
	"gptlab/planner"
	"gptlab/planner/arena"
	"gptlab/planner/recompute"
)

// PassCost is what one pass of a scheduled step takes, measured: its ops'
// time (from profiling the arena program), and from the planned arena the
// bytes it makes and how long they live.
type PassCost struct {
	Pass
	Ops   int
	Time  time.Duration
	Core  time.Duration // a forward's attention core ops
	Out   int64         // a forward's output; a backward's input gradient
	Kept  int64         // a forward's values still live when the backward starts, besides its output
	Temp  int64         // the most bytes it made live at once, less Out and Grads (at least Kept)
	Grads int64         // a backward's parameter gradients
	Steps [2]int        // its ops' positions in the arena's schedule, [from, to)
}

// PassCosts measures every pass of a model built with a step schedule:
// times are the medians of runs profiled runs on the batch last fed (Feed
// or Step first).
func (m *Model) PassCosts(runs int) ([]PassCost, error) {
	p := m.Arena()
	if p == nil || m.passes == nil {
		return nil, fmt.Errorf("%w: pass costs need a scheduled training model on the arena executor", ErrConfig)
	}
	times, err := p.Profile(runs)
	if err != nil {
		return nil, err
	}
	prob, _ := p.Problem()
	back := -1 // where the first backward starts
	out := make([]PassCost, len(m.passes))
	for i, rec := range m.passes {
		c := PassCost{Pass: rec.Pass, Ops: len(rec.ops)}
		c.Steps = [2]int{p.Steps(), 0}
		for _, n := range rec.ops {
			s, ok := p.StepOf(n)
			if !ok {
				continue // pruned: nothing retained needs it
			}
			c.Steps = [2]int{min(c.Steps[0], s), max(c.Steps[1], s+1)}
			c.Time += times[s]
		}
		for _, n := range rec.core {
			if s, ok := p.StepOf(n); ok {
				c.Core += times[s]
			}
		}
		if rec.Backward && back < 0 {
			back = c.Steps[0]
		}
		c.Out = bufferBytes(p, prob.Buffers, rec.out)
		for _, g := range rec.grads {
			c.Grads += bufferBytes(p, prob.Buffers, g)
		}
		out[i] = c
	}
	for i := range out {
		c := &out[i]
		if c.Steps[0] >= c.Steps[1] {
			continue
		}
		for s := c.Steps[0]; s < c.Steps[1]; s++ {
			var live int64
			for _, b := range prob.Buffers {
				if b.Start >= int64(c.Steps[0]) && b.Start < int64(c.Steps[1]) && b.Start <= int64(s) && int64(s) < b.End {
					live += b.Size
				}
			}
			c.Temp = max(c.Temp, live-c.Out-c.Grads)
		}
		if !c.Backward && back >= 0 {
			for _, b := range prob.Buffers {
				if b.Start >= int64(c.Steps[0]) && b.Start < int64(c.Steps[1]) && b.End > int64(back) {
					c.Kept += b.Size
				}
			}
			c.Kept = max(0, c.Kept-c.Out)
			c.Temp = max(c.Temp, c.Kept)
		}
	}
	return out, nil
}

// KeptBytes is what a scheduled step's arena holds as its first backward
// begins: the activations the forward kept for the backward, the
// checkpoints, and the logits and loss.
func (m *Model) KeptBytes() int64 {
	p := m.Arena()
	if p == nil {
		return 0
	}
	back := -1
	for _, rec := range m.passes {
		if !rec.Backward {
			continue
		}
		for _, n := range rec.ops {
			if s, ok := p.StepOf(n); ok && (back < 0 || s < back) {
				back = s
			}
		}
		break
	}
	if back < 0 {
		return 0
	}
	prob, _ := p.Problem()
	var live int64
	for _, b := range prob.Buffers {
		if b.Start < int64(back) && int64(back) < b.End {
			live += b.Size
		}
	}
	return live
}

// Work counts a scheduled step's forward work in FLOPs (2·m·n·k for a
// matrix product, one per output element for every other op): the first
// forward of every segment, and what the schedule runs again
// (recomputations, and the attention cores selective backwards recompute).
func (m *Model) Work() (forward, recomputed float64) {
	seen := map[int]bool{}
	for _, rec := range m.passes {
		if rec.Backward {
			for _, n := range rec.again {
				recomputed += flops(n)
			}
			continue
		}
		w := 0.0
		for _, n := range rec.ops {
			w += flops(n)
		}
		if seen[rec.Seg] {
			recomputed += w
		} else {
			forward += w
		}
		seen[rec.Seg] = true
	}
	return forward, recomputed
}

// flops is an op node's work: 2·m·n·k per matrix product, one per output
// element otherwise (a view: none).
func flops(n *G.Node) float64 {
	out := n.Shape()
	switch op := n.Op().(type) {
	case arena.MatMulOp:
		in := children(n)
		a := in[0].Shape()
		k := a[a.Dims()-1]
		if op.TransA {
			k = a[a.Dims()-2]
		}
		return 2 * float64(out.TotalSize()) * float64(k)
	case ops.FlopCounter: // the causal products: about half a full product
		in := children(n)
		return op.Flops([]tensor.Shape{in[0].Shape(), in[1].Shape()})
	case arena.ReshapeOp:
		return 0
	}
	return float64(out.TotalSize())
}

// bufferBytes is the planned size of n's storage (0 for nil, or a value
// outside the arena).
func bufferBytes(p *arena.Program, bufs []planner.Buffer, n *G.Node) int64 {
	if n == nil {
		return 0
	}
	b, ok := p.BufferOf(n)
	if !ok {
		return 0
	}
	return bufs[b].Size
}

// MeasureChain measures cfg's chain for a checkpointing search, on a batch
// (B, T) of idx and targets: the links are the segments after the
// embedding (link i is segment i+1), sized from the planned arena of the
// plain step (and, for the partial save of each attention half, from the
// selective step's) and timed by profiling the plain step's ops over runs
// runs. in is the chain input's bytes (the embedding's output), plainPeak
// the plain step's planned arena.
func MeasureChain(cfg Config, p *Params, B, T int, idx, tgt []int32, runs int, opts ...ModelOption) (links []recompute.Link, in, plainPeak int64, err error) {
	costs := func(s StepSchedule) ([]PassCost, int64, error) {
		m, err := NewModel(cfg, p, B, T, true, append(opts, WithStepSchedule(s))...)
		if err != nil {
			return nil, 0, err
		}
		defer m.Close()
		if err := m.Feed(idx, tgt); err != nil {
			return nil, 0, err
		}
		c, err := m.PassCosts(runs)
		return c, m.Arena().Stats().ArenaBytes, err
	}
	plain := PlainStepSchedule(cfg)
	pc, peak, err := costs(plain)
	if err != nil {
		return nil, 0, 0, err
	}
	sc, _, err := costs(plain.Selective(cfg))
	if err != nil {
		return nil, 0, 0, err
	}
	S := len(Chain(cfg))
	fwd := func(c []PassCost, seg int) PassCost { return c[seg] }       // F0 … F(S-1)
	bwd := func(c []PassCost, seg int) PassCost { return c[2*S-1-seg] } // B(S-1) … B0
	chain := Chain(cfg)
	for seg := 1; seg < S; seg++ {
		f, b := fwd(pc, seg), bwd(pc, seg)
		l := recompute.Link{
			Name: chain[seg].String(), Out: f.Out, Saved: f.Kept, TempF: f.Temp, TempB: b.Temp, Grads: b.Grads,
			Fwd: f.Time.Seconds(), Bwd: b.Time.Seconds(),
		}
		if chain[seg].Kind == SegAttn {
			sf, sb := fwd(sc, seg), bwd(sc, seg)
			l.PartSaved = max(1, sf.Kept)
			l.PartCost = f.Core.Seconds()
			l.PartTemp = max(0, sb.Temp-b.Temp)
		}
		links = append(links, l)
	}
	return links, fwd(pc, 0).Out, peak, nil
}
