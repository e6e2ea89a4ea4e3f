// Package arena runs a gorgonia graph from one planned arena: lifetimes of
// every op output are read off the graph in execution order, placed by a
// planner algorithm, and each op writes its output into its slice of a
// single allocation (UsePreallocDoer). The TapeMachine, which allocates
// every output on every run, stays the reference the tests compare with.
//
// What it does not do: differentiate (gorgonia.Grad builds the backward
// nodes into the same graph before Compile), or own parameters and inputs
// (the caller binds those with gorgonia.Let; they live outside the arena).
package arena

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner"
)

// Viewer is implemented by custom ops whose output shares its first
// input's storage (a reshape, a free transpose): their output is not
// planned; the input's lifetime is extended to cover the view's readers.
type Viewer interface {
	IsView() bool
}

// Program is a graph compiled for the arena executor.
type Program struct {
	g         *gorgonia.ExprGraph
	steps     []step
	slots     map[int64]int    // node ID -> index into values
	values    []gorgonia.Value // current value of every node, by slot
	nodes     []*gorgonia.Node // node of every slot
	inputs    []int            // slots read from bound node values each run
	problem   planner.Problem  // one buffer per planned op output
	plan      planner.Plan     // offsets into arena
	arena     []float64        // backing store; float64 words keep 8-byte alignment
	bufOf     map[int]int      // slot -> buffer index in problem (planned outputs only)
	outside   []Outside        // op outputs that cannot be written into the arena
	retained  []int            // slots the caller reads after Run
	lifetimes planner.Program  // the schedule as the planner sees it
	inPlace   int              // ops that write over an input
	inputAddr map[int]uintptr  // storage of each input when bound: a change means bind again
	scratch   []gorgonia.Value // the inputs of one step
}

// Outside is an op whose output does not live in the arena, with why.
type Outside struct {
	Node   string
	Op     string
	Bytes  int64
	Reason string
}

type step struct {
	node     *gorgonia.Node
	op       gorgonia.Op
	in       []int          // slots of the inputs, in argument order
	out      int            // slot of the output
	prealloc gorgonia.Value // tensor bound to the output's place in the arena, or nil
	view     bool           // output shares storage with in[0]
	reshape  bool           // a contiguous reshape: prealloc is the view itself, no op runs
	scalar   *gorgonia.F32  // the output of a scalar op run by its kernel
	kernel   func()         // allocation-free computation on fixed storage, or nil
}

// Options configure Compile.
type Options struct {
	Algorithm planner.Algorithm // placement; zero means greedy-by-size
	Alignment int64             // bytes; zero means 64
	InPlace   bool              // let elementwise ops write over an input when the planner finds it legal
}

// Compile orders the graph, derives the lifetime of every op output, plans
// the arena and binds a tensor in it to every op that can write there.
// Nodes in retain (the loss, gradients, requested outputs) stay intact until
// the end of a run, so the caller can read them after Run.
func Compile(ctx context.Context, g *gorgonia.ExprGraph, retain []*gorgonia.Node, o Options) (*Program, error) {
	if o.Alignment == 0 {
		o.Alignment = 64
	}
	if o.Algorithm.Place == nil {
		a, err := planner.Lookup("greedy-by-size")
		if err != nil {
			return nil, err
		}
		o.Algorithm = a
	}
	sorted, err := gorgonia.Sort(g)
	if err != nil {
		return nil, fmt.Errorf("arena: order the graph: %w", err)
	}
	p := &Program{g: g, slots: map[int64]int{}, bufOf: map[int]int{}}
	// gorgonia.Sort puts roots first; execution runs leaves first.
	for i := len(sorted) - 1; i >= 0; i-- {
		n := sorted[i]
		slot := len(p.nodes)
		p.slots[n.ID()] = slot
		p.nodes = append(p.nodes, n)
		if n.Op() == nil || isConstant(n) {
			p.inputs = append(p.inputs, slot)
			continue
		}
		st := step{node: n, op: n.Op(), out: slot}
		for it := g.From(n.ID()); it.Next(); {
			child := it.Node().(*gorgonia.Node)
			cs, ok := p.slots[child.ID()]
			if !ok {
				return nil, fmt.Errorf("arena: %v reads %v before it is computed", n, child)
			}
			st.in = append(st.in, cs)
		}
		st.view = isView(n.Op()) && len(st.in) > 0
		st.reshape = st.view && reflect.TypeOf(n.Op()).Name() == "reshapeOp"
		p.steps = append(p.steps, st)
	}
	p.values = make([]gorgonia.Value, len(p.nodes))
	if err := p.planLifetimes(ctx, retain, o); err != nil {
		return nil, err
	}
	return p, nil
}

// isConstant reports gorgonia's constant nodes, whose value the op holds.
func isConstant(n *gorgonia.Node) bool {
	switch reflect.TypeOf(n.Op()).Name() {
	case "constantScalar", "constantTensor":
		return true
	}
	return false
}

// isView reports ops whose output shares the input's storage: gorgonia's
// Reshape of a contiguous tensor returns a shallow clone, and custom ops
// say so through Viewer.
func isView(op gorgonia.Op) bool {
	if v, ok := op.(Viewer); ok {
		return v.IsView()
	}
	return reflect.TypeOf(op).Name() == "reshapeOp"
}

// bind lays the program on its storage: every planned op output gets its
// place in the arena, every reshape of one a header on the same place in
// its own shape (arena tensors are contiguous, so a reshape is only a new
// header, made once here instead of on every run), every float32 scalar a
// value allocated once; and every op whose inputs and output are all fixed
// storage gets its allocation-free kernel.
func (p *Program) bind() {
	owner := p.storageOwner()
	bufs := make([]Buf, len(p.nodes))
	fixed := make([]bool, len(p.nodes))
	p.inputAddr = make(map[int]uintptr, len(p.inputs))
	for _, s := range p.inputs {
		v := p.nodes[s].Value()
		bufs[s], fixed[s] = bufOf(v)
		if v != nil {
			p.inputAddr[s] = v.Uintptr()
		}
	}
	for i := range p.steps {
		st := &p.steps[i]
		st.prealloc, st.kernel = nil, nil
		n := st.node
		if b, ok := p.bufOf[st.out]; ok {
			st.prealloc = p.tensorAt(n, p.plan.Offsets[b])
		} else if b, ok := p.bufOf[owner[st.out]]; ok && st.reshape {
			st.prealloc = p.tensorAt(n, p.plan.Offsets[b])
		} else if n.IsScalar() && n.Dtype() == tensor.Float32 {
			st.scalar = new(gorgonia.F32)
		}
		switch {
		case st.prealloc != nil:
			bufs[st.out], fixed[st.out] = bufOf(st.prealloc)
		case st.scalar != nil:
			bufs[st.out] = Buf{F32: unsafe.Slice((*float32)(st.scalar), 1), Shape: tensor.ScalarShape()}
			fixed[st.out] = true
		}
		p.values[st.out] = nil
		if st.reshape && st.prealloc != nil {
			p.values[st.out] = st.prealloc
			continue
		}
		if !fixed[st.out] {
			continue
		}
		in := make([]Buf, len(st.in))
		ready := true
		for j, s := range st.in {
			in[j] = bufs[s]
			ready = ready && fixed[s]
		}
		if ready {
			st.kernel, _ = bindKernel(st.op, bufs[st.out], in)
		}
		if st.kernel != nil {
			if st.scalar != nil {
				p.values[st.out] = st.scalar
			} else {
				p.values[st.out] = st.prealloc
			}
		}
		if st.scalar != nil && st.kernel == nil {
			st.scalar = nil // the op's Do makes its own scalar
			fixed[st.out] = false
		}
	}
}

// bufOf returns the fixed storage of a value, if it has one.
func bufOf(v gorgonia.Value) (Buf, bool) {
	switch x := v.(type) {
	case *tensor.Dense:
		switch d := x.Data().(type) {
		case []float32:
			return Buf{F32: d, Shape: x.Shape()}, true
		case []int:
			return Buf{Int: d, Shape: x.Shape()}, true
		}
	case *gorgonia.F32:
		return Buf{F32: unsafe.Slice((*float32)(x), 1), Shape: tensor.ScalarShape()}, true
	}
	return Buf{}, false
}

// tensorAt returns a dense tensor of n's shape and dtype whose backing is
// the arena at offset.
func (p *Program) tensorAt(n *gorgonia.Node, offset int64) *tensor.Dense {
	base := unsafe.Pointer(uintptr(unsafe.Pointer(unsafe.SliceData(p.arena))) + uintptr(offset))
	size := n.Shape().TotalSize()
	var backing any
	switch n.Dtype() {
	case tensor.Float32:
		backing = unsafe.Slice((*float32)(base), size)
	case tensor.Float64:
		backing = unsafe.Slice((*float64)(base), size)
	}
	return tensor.New(tensor.WithShape(n.Shape()...), tensor.WithBacking(backing))
}

// Run executes every op once, in schedule order. Inputs (parameters,
// tokens) are read from the values bound to their nodes; if one was bound
// to new storage since the last run, the program is laid out again.
func (p *Program) Run() error {
	if err := p.loadInputs(); err != nil {
		return err
	}
	for i := range p.steps {
		if err := p.runStep(&p.steps[i]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Program) loadInputs() error {
	moved := false
	for _, s := range p.inputs {
		v := p.nodes[s].Value()
		if v == nil {
			return fmt.Errorf("arena: no value bound to input %v", p.nodes[s])
		}
		p.values[s] = v
		if v.Uintptr() != p.inputAddr[s] {
			moved = true
		}
	}
	if moved {
		p.bind()
	}
	return nil
}

// runStep runs one op: its kernel when it has one, else the op's
// UsePreallocDo into its arena tensor, else the op's Do.
func (p *Program) runStep(st *step) error {
	if st.kernel != nil {
		st.kernel()
		return nil
	}
	if st.reshape && st.prealloc != nil {
		return nil
	}
	in := p.scratch[:0]
	for _, s := range st.in {
		in = append(in, p.values[s])
	}
	p.scratch = in
	v, err := st.exec(in)
	if err != nil {
		return err
	}
	p.values[st.out] = v
	return nil
}

// Value returns the value n had at the end of the last Run.
func (p *Program) Value(n *gorgonia.Node) gorgonia.Value {
	s, ok := p.slots[n.ID()]
	if !ok {
		return nil
	}
	return p.values[s]
}

// Stats are the arena's figures.
type Stats struct {
	InPlace      int   // ops that write their output over an input
	Kernels      int   // ops run by an allocation-free kernel
	Prealloc     int   // ops run by gorgonia's UsePreallocDo into the arena
	Allocating   int   // ops run by gorgonia's Do, which allocates their output
	Steps        int   // ops run per Run
	Planned      int   // op outputs placed in the arena
	NaiveBytes   int64 // every planned output its own storage
	BoundBytes   int64 // most planned bytes live at one instant
	ArenaBytes   int64 // the planned arena
	OutsideBytes int64 // outputs that live outside the arena (see Outside)
}

// Stats returns the figures of the compiled plan.
func (p *Program) Stats() Stats {
	s := Stats{
		Steps:      len(p.steps),
		Planned:    len(p.problem.Buffers),
		InPlace:    p.inPlace,
		NaiveBytes: p.problem.Naive(),
		BoundBytes: p.problem.Bound(),
		ArenaBytes: p.plan.Peak,
	}
	for _, o := range p.outside {
		s.OutsideBytes += o.Bytes
	}
	for _, st := range p.steps {
		switch {
		case st.kernel != nil || st.reshape && st.prealloc != nil:
			s.Kernels++
		case st.prealloc != nil:
			s.Prealloc++
		default:
			s.Allocating++
		}
	}
	return s
}

// Outside lists the op outputs that do not live in the arena, with why.
func (p *Program) Outside() []Outside { return p.outside }

// Problem returns the lifetimes that were planned and the plan made for
// them, for reports and figures.
func (p *Program) Problem() (planner.Problem, planner.Plan) { return p.problem, p.plan }

// exec runs a step's op through gorgonia: into its arena tensor when it
// has one (UsePreallocDo), else with Do, which allocates the output.
func (st *step) exec(in []gorgonia.Value) (gorgonia.Value, error) {
	var v gorgonia.Value
	var err error
	if st.prealloc != nil {
		v, err = st.op.(gorgonia.UsePreallocDoer).UsePreallocDo(st.prealloc, in...)
	} else {
		v, err = st.op.Do(in...)
	}
	if err != nil {
		return nil, fmt.Errorf("arena: %v (%v): %w", st.node.Name(), st.op, err)
	}
	return v, nil
}

// Lifetimes returns the schedule as the planner saw it: one op per step,
// values named by ValueName.
func (p *Program) Lifetimes() planner.Program { return p.lifetimes }

// ValueName is the name of n's value in Lifetimes, or "" for a node not in
// the graph.
func (p *Program) ValueName(n *gorgonia.Node) string {
	s, ok := p.slots[n.ID()]
	if !ok {
		return ""
	}
	return p.slotName(s)
}

// slotName names a value in Lifetimes: an op's output by its slot number
// (the planner's buffer IDs, parsed back in planLifetimes), a graph input
// (a parameter, the tokens) by its node name.
func (p *Program) slotName(s int) string {
	if p.nodes[s].Op() == nil {
		return p.nodes[s].Name()
	}
	return strconv.Itoa(s)
}
