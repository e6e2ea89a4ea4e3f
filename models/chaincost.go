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

// CostModel is a deterministic cost of a step's ops, in seconds: a
// roofline, each op taking the longer of its FLOPs at FlopsPerSecond and
// the bytes it reads and writes at BytesPerSecond (a view: nothing). Its
// constants are fixed, so a schedule chosen on it is the same on every
// run and every machine, where one chosen on measured times follows the
// clock's noise; measured times are reported beside it.
type CostModel struct {
	FlopsPerSecond float64
	BytesPerSecond float64
}

// DefaultCost is the cost model of the checkpointing search: 100 GFLOP/s
// for arithmetic and 10 GB/s for memory traffic, about what one core of a
// recent x86 sustains in the project's f32 kernels (the matrix products
// near the former, the elementwise ops near the latter). Only ratios
// matter to the search: the products are compute-bound, softmax, GELU,
// LayerNorm and dropout memory-bound.
var DefaultCost = CostModel{FlopsPerSecond: 100e9, BytesPerSecond: 10e9}

// Op is the cost of one op of flops FLOPs moving bytes bytes.
func (c CostModel) Op(flops, bytes float64) float64 {
	return max(flops/c.FlopsPerSecond, bytes/c.BytesPerSecond)
}

// Node is the cost of an op node (see flops and opBytes).
func (c CostModel) Node(n *G.Node) float64 { return c.Op(flops(n), opBytes(n)) }

// Nodes is the summed cost of op nodes.
func (c CostModel) Nodes(ns []*G.Node) float64 {
	t := 0.0
	for _, n := range ns {
		t += c.Node(n)
	}
	return t
}

// PassCost is what one pass of a scheduled step takes: its ops' work
// (FLOPs, bytes moved) and their cost in a CostModel, deterministic; when
// profiled, its ops' measured time beside it; and from the planned arena
// the bytes it makes and how long they live.
type PassCost struct {
	Pass
	Ops       int
	Flops     float64       // its ops' FLOPs (see flops)
	Bytes     float64       // the bytes its ops read and write (see opBytes)
	Cost      float64       // its ops' cost in the model, seconds
	CoreCost  float64       // a forward's attention core ops' cost
	AgainCost float64       // a selective backward's recomputed ops' cost
	Time      time.Duration // measured (profiled runs; 0 without)
	Core      time.Duration // measured: a forward's attention core ops
	Out       int64         // a forward's output; a backward's input gradient
	Kept      int64         // a forward's values still live when the backward starts, besides its output
	Temp      int64         // the most bytes it made live at once, less Out and Grads (at least Kept)
	Grads     int64         // a backward's parameter gradients
	Steps     [2]int        // its ops' positions in the arena's schedule, [from, to)
}

// PassCosts costs every pass of a model built with a step schedule in the
// cost model, and with runs > 0 measures each too: times are the medians
// of runs profiled runs on the batch last fed (Feed or Step first). Only
// ops the arena runs count (a pruned one costs nothing).
func (m *Model) PassCosts(runs int, cost CostModel) ([]PassCost, error) {
	p := m.Arena()
	if p == nil || m.passes == nil {
		return nil, fmt.Errorf("%w: pass costs need a scheduled training model on the arena executor", ErrConfig)
	}
	var times []time.Duration
	if runs > 0 {
		var err error
		if times, err = p.Profile(runs); err != nil {
			return nil, err
		}
	}
	measured := func(s int) time.Duration {
		if times == nil {
			return 0
		}
		return times[s]
	}
	run := func(ns []*G.Node) []*G.Node { // the ops the arena runs
		var out []*G.Node
		for _, n := range ns {
			if _, ok := p.RunsOp(n); ok {
				out = append(out, n)
			}
		}
		return out
	}
	prob, _ := p.Problem()
	back := -1 // where the first backward starts
	out := make([]PassCost, len(m.passes))
	for i, rec := range m.passes {
		c := PassCost{Pass: rec.Pass, Ops: len(rec.ops)}
		c.Steps = [2]int{p.Steps(), 0}
		for _, n := range run(rec.ops) {
			s, _ := p.RunsOp(n)
			c.Steps = [2]int{min(c.Steps[0], s), max(c.Steps[1], s+1)}
			c.Time += measured(s)
			c.Flops += flops(n)
			c.Bytes += opBytes(n)
		}
		c.Cost = cost.Nodes(run(rec.ops))
		for _, n := range run(rec.core) {
			s, _ := p.RunsOp(n)
			c.Core += measured(s)
		}
		c.CoreCost = cost.Nodes(run(rec.core))
		c.AgainCost = cost.Nodes(run(rec.again))
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
		var in []tensor.Shape
		for _, c := range children(n) {
			in = append(in, c.Shape())
		}
		return op.Flops(in)
	case arena.ReshapeOp:
		return 0
	}
	return float64(out.TotalSize())
}

// opBytes is the bytes an op node reads and writes: its inputs' and its
// output's elements (a view: none).
func opBytes(n *G.Node) float64 {
	if _, ok := n.Op().(arena.ReshapeOp); ok {
		return 0
	}
	size := func(x *G.Node) float64 {
		e := 4.0
		if dt := x.Dtype(); dt.Type != nil && dt.Size() > 0 {
			e = float64(dt.Size())
		}
		return float64(x.Shape().TotalSize()) * e
	}
	b := size(n)
	for _, x := range children(n) {
		b += size(x)
	}
	return b
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

// ChainMeasure is a config's chain for a checkpointing search.
type ChainMeasure struct {
	// Links are the segments after the embedding (link i is segment i+1),
	// sized from the planned arena and timed by the cost model: the search
	// runs on these, the same on every run.
	Links []recompute.Link
	// Measured are the same links with the profiled times instead (nil
	// without profiling): for reporting beside the cost, never for the
	// search.
	Measured  []recompute.Link
	In        int64 // the chain input's bytes (the embedding's output)
	PlainPeak int64 // the plain step's planned arena
}

// MeasureChain measures cfg's chain for a checkpointing search, on a batch
// (B, T) of idx and targets: the links are the segments after the
// embedding (link i is segment i+1), sized from the planned arena of the
// plain step (and, for the partial save of each attention half, from the
// selective step's) and timed by the cost model: a forward's and a
// backward's ops, and for the partial save what the selective backward
// recomputes. With runs > 0 the plain and selective steps are profiled
// over runs runs too, for Measured.
func MeasureChain(cfg Config, p *Params, B, T int, idx, tgt []int32, runs int, cost CostModel, opts ...ModelOption) (ChainMeasure, error) {
	costs := func(s StepSchedule) ([]PassCost, int64, error) {
		m, err := NewModel(cfg, p, B, T, true, append(opts, WithStepSchedule(s))...)
		if err != nil {
			return nil, 0, err
		}
		defer m.Close()
		if runs > 0 {
			if err := m.Feed(idx, tgt); err != nil {
				return nil, 0, err
			}
		}
		c, err := m.PassCosts(runs, cost)
		return c, m.Arena().Stats().ArenaBytes, err
	}
	plain := PlainStepSchedule(cfg)
	pc, peak, err := costs(plain)
	if err != nil {
		return ChainMeasure{}, err
	}
	sc, _, err := costs(plain.Selective(cfg))
	if err != nil {
		return ChainMeasure{}, err
	}
	S := len(Chain(cfg))
	fwd := func(c []PassCost, seg int) PassCost { return c[seg] }       // F0 … F(S-1)
	bwd := func(c []PassCost, seg int) PassCost { return c[2*S-1-seg] } // B(S-1) … B0
	chain := Chain(cfg)
	ch := ChainMeasure{In: fwd(pc, 0).Out, PlainPeak: peak}
	for seg := 1; seg < S; seg++ {
		f, b := fwd(pc, seg), bwd(pc, seg)
		l := recompute.Link{
			Name: chain[seg].String(), Out: f.Out, Saved: f.Kept, TempF: f.Temp, TempB: b.Temp, Grads: b.Grads,
			Fwd: f.Cost, Bwd: b.Cost,
		}
		ml := l
		ml.Fwd, ml.Bwd = f.Time.Seconds(), b.Time.Seconds()
		if chain[seg].Kind == SegAttn {
			sf, sb := fwd(sc, seg), bwd(sc, seg)
			l.PartSaved = max(1, sf.Kept)
			l.PartCost = sb.AgainCost
			l.PartTemp = max(0, sb.Temp-b.Temp)
			ml.PartSaved, ml.PartTemp = l.PartSaved, l.PartTemp
			ml.PartCost = f.Core.Seconds()
		}
		ch.Links = append(ch.Links, l)
		ch.Measured = append(ch.Measured, ml)
	}
	if runs <= 0 {
		ch.Measured = nil
	}
	return ch, nil
}
