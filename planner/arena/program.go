// Package arena is the runtime of gptlab: every graph the project runs —
// a training step, plain or checkpointed or under a precision policy, an
// evaluation, the KV-cached decoder's prefill and decode, a block split
// across ranks — runs here, from one planned arena. (The name stays: the
// one planned allocation is what the runtime exists to show; "runtime" and
// "exec" would shadow the standard library's packages.) Every op
// output gets a typed value (f32, bf16, fp16, int8, int32, int, f64) whose
// lifetime is read off the schedule, the planner places the values' real
// byte sizes in one allocation, and each op writes its output into its
// place. The schedule is gorgonia's topological order or an explicit one
// the caller gives (a recomputation placed right before the backward that
// needs it). Ops run as allocation-free kernels bound once to their
// storage (Kernel); an op without one runs its UsePreallocDo into the
// arena, or its Do outside it. The package owns the generic tensor ops the
// executor knows by type (MatMul with explicit transposes, Add, Mul,
// Gather, ScatterAdd, Reshape as a view, Cast between f32 and the 16-bit
// and 8-bit formats).
//
// What it does not do: differentiate (the caller builds the backward
// nodes into the same graph before Compile), or own parameters and inputs
// (the caller binds those with gorgonia.Let or WithValue; they live
// outside the arena). gorgonia's TapeMachine, which allocates every output
// on every run, stays the reference the tests compare with.
package arena

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/planner"
	"gptlab/precision"
)

// Viewer is implemented by ops whose output is their first input's
// storage in another shape (a reshape): nothing runs, no storage is
// planned, and the input's lifetime covers the view's readers.
type Viewer interface {
	IsView() bool
}

// Value identifies one value of a Program: a graph input or an op output.
type Value int32

// Program is a graph compiled for the arena executor.
type Program struct {
	g         *gorgonia.ExprGraph
	vals      []value
	byNode    map[int64]Value
	fused     map[int64]Value // a fused cast up -> the bf16 value in its place (fuse.go)
	steps     []step
	inputs    []Value
	retained  []Value
	current   []gorgonia.Value // the value of each Value after the last run
	bufs      []Buf            // fixed storage of each Value, when it has one
	names     map[string]Value // planner value names, back to the Value
	problem   planner.Problem  // one buffer per planned op output
	temps     []planner.Temp   // the planner's view of every value, buffers in order
	plan      planner.Plan     // offsets into arena
	arena     []float64        // backing store; float64 words keep 8-byte alignment
	bufOf     map[Value]int    // planned Value -> buffer index in problem
	outside   []Outside        // op outputs that cannot be written into the arena
	lifetimes planner.Program  // the schedule as the planner sees it
	inPlace   int              // ops that write over an input
	inputAddr map[Value]uintptr
	scratch   [2][]gorgonia.Value // the inputs of one step, per stream
	notify    [][]func()          // per step: called after it runs
	rounding  [][]func()          // per step of a round trip: called before its output is rounded
	retain    []*gorgonia.Node    // as Compile was given them, for SetStreams
	opts      Options
	streams   streamState // streams.go
}

// value is what the program knows of one Value.
type value struct {
	node     *gorgonia.Node
	dtype    Dtype
	step     int            // the step that writes it; -1 for a graph input
	constant gorgonia.Value // for an op without inputs: its value, computed once
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
	in       []Value // in argument order
	out      Value
	view     bool          // out is in[0]'s storage in another shape
	prealloc *tensor.Dense // a tensor on the output's storage, or nil
	kernel   func()        // allocation-free computation on fixed storage, or nil
	// round: the output is rounded in place to bf16 values after the op
	// (a round trip's casts, fuse.go), by rounder on fixed storage.
	round   bool
	rounder func()
}

// Options configure Compile.
type Options struct {
	Algorithm planner.Algorithm // placement; zero means greedy-by-size
	Alignment int64             // bytes; zero means 64
	InPlace   bool              // let ops write over an input when the planner finds it legal (InPlacer)
	// Order, when not nil, is the schedule: every op node of the graph
	// once, each after the ops that compute its inputs. Nil means
	// gorgonia's topological order.
	Order []*gorgonia.Node
	// KeepCasts runs every cast up from bf16 as its own op, even where
	// all its readers could read the bf16 value instead (BF16Reader):
	// for comparisons and the tests.
	KeepCasts bool
}

// Compile orders the graph, derives the lifetime of every op output, plans
// the arena and binds every op to its storage. Nodes in retain (the loss,
// gradients, requested outputs) stay intact until the end of a run, so
// the caller can read them after Run.
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
	order, err := schedule(g, retain, o.Order)
	if err != nil {
		return nil, err
	}
	p := &Program{g: g, byNode: map[int64]Value{}, bufOf: map[Value]int{}, fused: map[int64]Value{}}
	var fuse fusion
	if !o.KeepCasts {
		fuse = p.fuseCasts(order, retain)
	}
	for _, n := range order {
		if fuse.reads[n] {
			it := g.From(n.ID())
			it.Next()
			p.fused[n.ID()], _ = p.valueOf(it.Node().(*gorgonia.Node)) // the value cast
			continue
		}
		if src, ok := fuse.ups[n]; ok {
			p.byNode[n.ID()] = p.byNode[src.ID()] // the cast up is the rounded output
			continue
		}
		if fuse.drops[n] {
			continue
		}
		if err := p.add(n); err != nil {
			return nil, err
		}
	}
	for _, src := range fuse.ups {
		p.steps[p.vals[p.byNode[src.ID()]].step].round = true
	}
	p.current = make([]gorgonia.Value, len(p.vals))
	p.bufs = make([]Buf, len(p.vals))
	p.notify = make([][]func(), len(p.steps))
	p.rounding = make([][]func(), len(p.steps))
	p.retain, p.opts = retain, o
	if err := p.planLifetimes(ctx, retain, o, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// add makes n's value: an input (no op, or an op without inputs, whose
// value is fixed), or the output of a step reading values made before.
func (p *Program) add(n *gorgonia.Node) error {
	v := Value(len(p.vals))
	p.byNode[n.ID()] = v
	var in []Value
	for it := p.g.From(n.ID()); it.Next(); {
		c := it.Node().(*gorgonia.Node)
		cv, ok := p.valueOf(c)
		if !ok {
			return fmt.Errorf("arena: %v reads %v before it is computed", n, c)
		}
		in = append(in, cv)
	}
	dt, ok := dtypeOf(n.Dtype())
	if t, isTyped := n.Op().(Typer); isTyped {
		dt, ok = t.OutDtype(), true
	}
	vw, isView := n.Op().(Viewer)
	isView = isView && vw.IsView() && len(in) == 1
	if isView {
		dt, ok = p.vals[in[0]].dtype, true // a view holds its input's format (a bf16 value's alias is bf16)
	}
	if n.Op() == nil || len(in) == 0 {
		if n.Op() != nil && !ok && n.Dtype() == tensor.Uint16 {
			return fmt.Errorf("arena: %v: 16-bit value of unknown format (its op must say: Typer)", n)
		}
		val := value{node: n, dtype: dt, step: -1}
		if n.Op() != nil && n.Value() == nil {
			c, err := n.Op().Do()
			if err != nil {
				return fmt.Errorf("arena: constant %v: %w", n, err)
			}
			val.constant = c
		}
		p.vals = append(p.vals, val)
		p.inputs = append(p.inputs, v)
		return nil
	}
	if !ok && n.Dtype() == tensor.Uint16 {
		return fmt.Errorf("arena: %v (%v): 16-bit output of unknown format (the op must say: Typer)", n, n.Op())
	}
	st := step{node: n, op: n.Op(), in: in, out: v, view: isView}
	p.vals = append(p.vals, value{node: n, dtype: dt, step: len(p.steps)})
	p.steps = append(p.steps, st)
	return nil
}

// schedule is the order values are made in: the graph's inputs, then
// its ops, each after the ops computing its inputs. Only what the
// retained nodes depend on is scheduled (all of the graph when retain is
// empty). An explicit order of op nodes is checked: it must hold every op
// the retained nodes need, each once and after the ops it reads; it may
// hold other ops of the graph, which then run too.
func schedule(g *gorgonia.ExprGraph, retain, order []*gorgonia.Node) ([]*gorgonia.Node, error) {
	isOp := func(n *gorgonia.Node) bool { return n.Op() != nil && g.From(n.ID()).Len() > 0 }
	need := ancestors(g, retain)
	if order == nil {
		sorted, err := gorgonia.Sort(g)
		if err != nil {
			return nil, fmt.Errorf("arena: order the graph: %w", err)
		}
		var out []*gorgonia.Node
		for i := len(sorted) - 1; i >= 0; i-- { // gorgonia.Sort puts roots first
			if n := sorted[i]; need == nil || need[n] {
				out = append(out, n)
			}
		}
		return out, nil
	}
	pos := make(map[int64]int, len(order))
	read := map[*gorgonia.Node]bool{} // inputs the ordered ops read
	for i, n := range order {
		switch {
		case n == nil || g.Node(n.ID()) != n:
			return nil, fmt.Errorf("arena: order[%d] %v is not a node of the graph", i, n)
		case !isOp(n):
			return nil, fmt.Errorf("arena: order[%d] %v is an input, not an op", i, n)
		}
		if j, dup := pos[n.ID()]; dup {
			return nil, fmt.Errorf("arena: order[%d] %v is order[%d] again", i, n, j)
		}
		pos[n.ID()] = i
		for it := g.From(n.ID()); it.Next(); {
			c := it.Node().(*gorgonia.Node)
			if j, ok := pos[c.ID()]; isOp(c) && (!ok || j >= i) {
				return nil, fmt.Errorf("arena: order[%d] %v reads %v, which the order computes later or not at all", i, n, c)
			}
			read[c] = true
		}
	}
	var out []*gorgonia.Node
	for _, n := range g.AllNodes() {
		_, ordered := pos[n.ID()]
		switch {
		case isOp(n) && !ordered && (need == nil || need[n]):
			return nil, fmt.Errorf("arena: the order leaves out op %v, which the retained nodes need", n)
		case !isOp(n) && (read[n] || need == nil || need[n]):
			out = append(out, n)
		}
	}
	return append(out, order...), nil
}

// ancestors are the nodes the retained nodes depend on (themselves
// included), or nil for no retained node: everything.
func ancestors(g *gorgonia.ExprGraph, retain []*gorgonia.Node) map[*gorgonia.Node]bool {
	if len(retain) == 0 {
		return nil
	}
	need := map[*gorgonia.Node]bool{}
	stack := append([]*gorgonia.Node(nil), retain...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if need[n] {
			continue
		}
		need[n] = true
		for it := g.From(n.ID()); it.Next(); {
			stack = append(stack, it.Node().(*gorgonia.Node))
		}
	}
	return need
}

// bind lays the program on its storage: every planned op output gets its
// place in the arena, every view the storage of what it views in its own
// shape, and every op whose inputs and output all have fixed storage its
// allocation-free kernel.
func (p *Program) bind() {
	base := unsafe.Pointer(unsafe.SliceData(p.arena))
	fixed := make([]bool, len(p.vals))
	p.inputAddr = make(map[Value]uintptr, len(p.inputs))
	for _, v := range p.inputs {
		val := p.inputValue(v)
		p.bufs[v], fixed[v] = BufOf(val, p.vals[v].dtype)
		if val != nil {
			p.inputAddr[v] = val.Uintptr()
		}
	}
	for i := range p.steps {
		st := &p.steps[i]
		st.prealloc, st.kernel = nil, nil
		p.current[st.out] = nil
		n, dt := st.node, p.vals[st.out].dtype
		switch b, planned := p.bufOf[st.out]; {
		case planned:
			p.bufs[st.out] = bufAt(dt, n.Shape(), unsafe.Add(base, p.plan.Offsets[b]))
			fixed[st.out] = true
		case st.view && fixed[st.in[0]] && p.bufs[st.in[0]].Len() == n.Shape().TotalSize():
			src := p.bufs[st.in[0]]
			p.bufs[st.out] = bufAt(dt, n.Shape(), unsafe.Pointer(unsafe.SliceData(src.Bytes())))
			fixed[st.out] = true
		}
		if !fixed[st.out] {
			continue
		}
		st.prealloc = p.bufs[st.out].Dense()
		p.current[st.out] = st.prealloc
		if st.view {
			continue // nothing runs: the header is the value
		}
		k, isKernel := st.op.(Kernel)
		if !isKernel {
			continue
		}
		in := make([]Buf, len(st.in))
		ready := true
		for j, s := range st.in {
			in[j] = p.bufs[s]
			ready = ready && fixed[s]
		}
		if ready {
			st.kernel, _ = k.BindKernel(p.bufs[st.out], in)
		}
	}
	for i := range p.steps {
		st := &p.steps[i]
		st.rounder = nil
		if st.round && fixed[st.out] {
			st.rounder = roundKernel(p.bufs[st.out].F32)
		}
	}
}

// roundKernel rounds x in place to bf16 values, split as a cast is.
func roundKernel(x []float32) func() {
	n := len(x)
	return par.New((n+castGrain-1)/castGrain, castGrain, func(lo, hi int) {
		precision.RoundBF16(x[lo*castGrain : min(hi*castGrain, n)])
	}).Run
}

// inputValue is the value an input node holds: the one bound to it, or
// the value of a constant op.
func (p *Program) inputValue(v Value) gorgonia.Value {
	if c := p.vals[v].constant; c != nil {
		return c
	}
	return p.vals[v].node.Value()
}

// Run executes every op once, in schedule order, or on two streams when
// SetStreams gave it two (streams.go). Inputs (parameters, tokens) are
// read from the values bound to their nodes; if one was bound to new
// storage since the last run, the program is laid out again.
func (p *Program) Run() error {
	if err := p.loadInputs(); err != nil {
		return err
	}
	if p.streams.n > 1 {
		return p.runStreams()
	}
	return p.runSequential()
}

func (p *Program) loadInputs() error {
	moved := false
	for _, v := range p.inputs {
		val := p.inputValue(v)
		if val == nil {
			return fmt.Errorf("arena: no value bound to input %v", p.vals[v].node)
		}
		p.current[v] = val
		if val.Uintptr() != p.inputAddr[v] {
			moved = true
		}
	}
	if moved {
		p.bind()
	}
	return nil
}

// runStep runs step i on stream s (its kernel when it has one, else the
// op's UsePreallocDo into its arena tensor, else the op's Do) and then
// whatever waits for it.
func (p *Program) runStep(i, stream int) error {
	st := &p.steps[i]
	switch {
	case st.kernel != nil:
		st.kernel()
	case st.view && st.prealloc != nil:
	default:
		in := p.scratch[stream][:0]
		for _, s := range st.in {
			in = append(in, p.current[s])
		}
		p.scratch[stream] = in
		v, err := st.exec(in)
		if err != nil {
			return err
		}
		p.current[st.out] = v
	}
	if st.round {
		for _, f := range p.rounding[i] {
			f()
		}
		if st.rounder == nil { // an output outside the arena: bound anew each run
			roundKernel(p.current[st.out].Data().([]float32))()
		} else {
			st.rounder()
		}
	}
	for _, f := range p.notify[i] {
		f()
	}
	return nil
}

// exec runs a step's op through gorgonia: into its arena tensor when it
// has one (UsePreallocDo), else with Do, which allocates the output.
func (st *step) exec(in []gorgonia.Value) (gorgonia.Value, error) {
	var v gorgonia.Value
	var err error
	if pd, ok := st.op.(gorgonia.UsePreallocDoer); ok && st.prealloc != nil {
		v, err = pd.UsePreallocDo(st.prealloc, in...)
	} else {
		v, err = st.op.Do(in...)
	}
	if err != nil {
		return nil, fmt.Errorf("arena: %v (%v): %w", st.node.Name(), st.op, err)
	}
	return v, nil
}

// Value returns the value n had at the end of the last Run.
func (p *Program) Value(n *gorgonia.Node) gorgonia.Value {
	v, ok := p.byNode[n.ID()]
	if !ok {
		return nil
	}
	return p.current[v]
}

// Buf returns n's storage as the arena holds it (typed: a bf16 value as
// its bits), or false for a node outside the arena and not an input.
func (p *Program) Buf(n *gorgonia.Node) (Buf, bool) {
	v, ok := p.byNode[n.ID()]
	if !ok || p.bufs[v].Shape == nil {
		return Buf{}, false
	}
	return p.bufs[v], true
}

// Dtype is the element type of n's value in the program.
func (p *Program) Dtype(n *gorgonia.Node) (Dtype, bool) {
	v, ok := p.byNode[n.ID()]
	if !ok {
		return 0, false
	}
	return p.vals[v].dtype, true
}

// StepOf is the position in the schedule of the op that computes n: the
// moment its value is final. False for an input or a node not in the graph.
func (p *Program) StepOf(n *gorgonia.Node) (int, bool) {
	v, ok := p.byNode[n.ID()]
	if !ok || p.vals[v].step < 0 {
		return 0, false
	}
	return p.vals[v].step, true
}

// RunsOp is the position in the schedule of the step that runs n's own
// op, or false when none does: an input, a node not in the graph, or a
// cast fused away (fuse.go). It differs from StepOf for the cast up of a
// round trip, whose value is final when the op it rounds has run.
func (p *Program) RunsOp(n *gorgonia.Node) (int, bool) {
	v, ok := p.byNode[n.ID()]
	if !ok || p.vals[v].step < 0 || p.vals[v].node != n {
		return 0, false
	}
	return p.vals[v].step, true
}

// Steps is the number of ops one Run executes.
func (p *Program) Steps() int { return len(p.steps) }

// WhenWritten arranges for f(i) to be called during every Run right after
// the op computing nodes[i] has run, on the goroutine running the
// program: a gradient is final then, and an all-reduce of it may start
// while the rest of the backward runs.
func (p *Program) WhenWritten(nodes []*gorgonia.Node, f func(i int)) error {
	for i, n := range nodes {
		s, ok := p.StepOf(n)
		if !ok {
			return fmt.Errorf("arena: %v is not computed by the program", n)
		}
		p.notify[s] = append(p.notify[s], func() { f(i) })
	}
	return nil
}

// WhenRounding arranges for f(i) to be called during every Run right
// after the op computing nodes[i] has run and before the program rounds
// its output in place to bf16 values (a round trip: the op's cast down
// and back up run as that rounding, fuse.go), on the goroutine running
// the op: Value(nodes[i]) then holds the values the cast down would have
// read. It fails for a node whose output is not rounded so.
func (p *Program) WhenRounding(nodes []*gorgonia.Node, f func(i int)) error {
	for _, n := range nodes {
		if !p.RoundsInPlace(n) {
			return fmt.Errorf("arena: %v is not rounded in place by the program", n)
		}
	}
	for i, n := range nodes {
		s, _ := p.RunsOp(n)
		p.rounding[s] = append(p.rounding[s], func() { f(i) })
	}
	return nil
}

// RoundsInPlace reports whether the program rounds n's output in place
// to bf16 values after the op computing it (a round trip, fuse.go).
func (p *Program) RoundsInPlace(n *gorgonia.Node) bool {
	s, ok := p.RunsOp(n)
	return ok && p.steps[s].round
}

// Stats are the arena's figures.
type Stats struct {
	InPlace      int   // ops that write their output over an input
	Kernels      int   // ops run by an allocation-free kernel (views count: nothing runs)
	Prealloc     int   // ops run by their UsePreallocDo into the arena
	Allocating   int   // ops run by their Do, which allocates the output
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
		case st.kernel != nil || st.view && st.prealloc != nil:
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

// Lifetimes returns the schedule as the planner saw it: one op per step,
// values named by ValueName.
func (p *Program) Lifetimes() planner.Program { return p.lifetimes }

// ValueName is the name of n's value in Lifetimes, or "" for a node not in
// the graph.
func (p *Program) ValueName(n *gorgonia.Node) string {
	v, ok := p.byNode[n.ID()]
	if !ok {
		return ""
	}
	return p.name(v)
}

// name names a value in Lifetimes: an op's output by its number, a graph
// input (a parameter, the tokens) by its node name.
func (p *Program) name(v Value) string {
	if p.vals[v].step < 0 {
		return p.vals[v].node.Name()
	}
	return strconv.Itoa(int(v))
}

// BufferOf is the index in Problem's buffers of the storage n's value
// takes (the base's, for a view), or false for a value outside the arena
// or an input.
func (p *Program) BufferOf(n *gorgonia.Node) (int, bool) {
	v, ok := p.byNode[n.ID()]
	if !ok {
		return 0, false
	}
	b, ok := p.bufOf[p.storageOwner()[v]]
	return b, ok
}

// Profile runs the program runs times and returns the median time of each
// step (the op at that position of the schedule), for cost models that
// need what each part of a program takes. Timing every op adds a clock
// read per op; the sum is close to, not equal to, a Run's time.
func (p *Program) Profile(runs int) ([]time.Duration, error) {
	if runs < 1 {
		return nil, fmt.Errorf("arena: profile of %d runs", runs)
	}
	times := make([][]time.Duration, len(p.steps))
	for i := range times {
		times[i] = make([]time.Duration, runs)
	}
	for r := range runs {
		if err := p.loadInputs(); err != nil {
			return nil, err
		}
		for i := range p.steps {
			t0 := time.Now()
			if err := p.runStep(i, 0); err != nil {
				return nil, err
			}
			times[i][r] = time.Since(t0)
		}
	}
	out := make([]time.Duration, len(p.steps))
	for i, ts := range times {
		slices.Sort(ts)
		out[i] = ts[runs/2]
	}
	return out, nil
}
