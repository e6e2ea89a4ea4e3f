package models

import (
	"context"
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/planner"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// ModelOption configures NewModel.
type ModelOption func(*modelOptions)

type modelOptions struct {
	tape      bool
	arena     arena.Options
	schedule  *StepSchedule
	rng       RNGOptions
	stat      *RunningMean
	statGuard bool
	precision precision.Policy // WithPrecision (mixed.go)
	int8      *int8Option      // WithInt8 (int8.go)
	streams   Streams          // WithStreams
}

// Streams says how many streams a model's step runs on (WithStreams).
type Streams int

const (
	// OneStream runs the ops one after another, each free to split its
	// work across the cores (the default).
	OneStream Streams = iota
	// TwoStreams runs them on the two streams the stream scheduler
	// assigns from the ops' measured costs (arena.Program.AssignStreams).
	TwoStreams
	// StreamsByMeasurement assigns two streams, times the step both ways
	// and keeps the faster (arena.Program.ChooseStreams).
	StreamsByMeasurement
	// HalfBatches cuts a training step into two halves of its batch (B
	// even: the first B/2 sequences and the last), each through every
	// layer on a stream of its own; the scheduler places the ops the
	// halves share (halves.go) on the cost model's costs (DefaultCost),
	// so the same way on every run. The logits and dropout masks are bitwise
	// those of the whole-batch step; the loss and the gradients of the
	// weights and biases add the halves' sums, so they differ from the
	// whole batch's by float32 rounding. The halved step gives the same
	// bits on one stream as on two (with one CPU, it runs on one).
	HalfBatches
)

// streamRuns is how many runs of the step measure each op's costs, and
// then each way of running it.
const streamRuns = 5

// WithStreams runs a training or evaluation model's graph on the streams
// s says. Assigning two streams runs the graph 2·streamRuns times when the
// model is made (3·streamRuns by measurement, none for HalfBatches), on
// the tokens bound then;
// the graph must have no effect but its outputs (not WithRunningMean).
// Results are bitwise those of one stream.
func WithStreams(s Streams) ModelOption { return func(o *modelOptions) { o.streams = s } }

// WithStepSchedule builds a training model's step by a schedule of forward,
// recomputation and backward passes (gradient checkpointing), run in that
// order: the arena follows it (arena.Options.Order), so what each
// schedule keeps and recomputes is what the planned arena holds.
func WithStepSchedule(s StepSchedule) ModelOption { return func(o *modelOptions) { o.schedule = &s } }

// defaultArena is how a model's arena is planned unless WithArena says
// otherwise: the default planner, ops in place where legal.
func defaultArena() arena.Options { return arena.Options{InPlace: true} }

// WithTapeMachine runs the graph with gorgonia's TapeMachine, which
// allocates every op output on every step: the reference the arena
// executor is tested against.
func WithTapeMachine() ModelOption { return func(o *modelOptions) { o.tape = true } }

// WithArena sets how the arena is planned (planner, alignment, in-place).
func WithArena(a arena.Options) ModelOption { return func(o *modelOptions) { o.arena = a } }

// defaultPlanner is the best placement algorithm available: the search
// planner when it is registered, else greedy-by-size.
func defaultPlanner() planner.Algorithm {
	for _, name := range []string{"search", "greedy-by-size"} {
		if a, err := planner.Lookup(name); err == nil {
			return a
		}
	}
	return planner.Algorithms()[0]
}

// newExecutor makes the executor of a graph whose retained nodes the
// caller reads after each run: the planned arena (the default planner
// when o names none), or the TapeMachine.
func newExecutor(g *G.ExprGraph, retain G.Nodes, o modelOptions) (executor, error) {
	return newExecutorPinned(g, retain, o, nil)
}

// newExecutorPinned is newExecutor with the streams of some steps given
// by pins (HalfBatches: the model's halfPins).
func newExecutorPinned(g *G.ExprGraph, retain G.Nodes, o modelOptions, pins func(*arena.Program) []int) (executor, error) {
	if o.streams != OneStream && (o.tape || o.stat != nil) {
		return nil, fmt.Errorf("%w: two streams need the arena executor and a graph without stateful ops (not the TapeMachine, not WithRunningMean)", ErrConfig)
	}
	if o.tape {
		return &tapeExec{vm: G.NewTapeMachine(g)}, nil
	}
	if o.arena.Algorithm.Place == nil {
		o.arena.Algorithm = defaultPlanner()
	}
	ctx := context.Background()
	prog, err := arena.Compile(ctx, g, retain, o.arena)
	if err != nil {
		return nil, fmt.Errorf("plan the GPT's arena: %w", err)
	}
	e := &arenaExec{p: prog}
	switch o.streams {
	case OneStream:
		return e, nil
	case TwoStreams:
		e.streams, err = prog.AssignStreams(ctx, streamRuns)
	case StreamsByMeasurement:
		e.streams, err = prog.ChooseStreams(ctx, streamRuns)
	case HalfBatches:
		if pins == nil {
			return nil, fmt.Errorf("%w: streams of half batches are for a training model's step", ErrConfig)
		}
		var costs []planner.Cost
		if costs, err = streamCosts(prog, g, DefaultCost, halvesSplit); err == nil {
			e.streams, err = prog.AssignStreamsFromPinned(ctx, costs, pins(prog))
		}
	default:
		return nil, fmt.Errorf("%w: streams %d", ErrConfig, o.streams)
	}
	if err != nil {
		return nil, fmt.Errorf("the GPT's streams: %w", err)
	}
	return e, nil
}

// executor runs the model's graph and holds the values of its nodes.
type executor interface {
	run() error
	value(n *G.Node) G.Value
	close() error
}

type tapeExec struct{ vm G.VM }

func (e *tapeExec) run() error {
	e.vm.Reset()
	return e.vm.RunAll()
}
func (e *tapeExec) value(n *G.Node) G.Value { return n.Value() }
func (e *tapeExec) close() error            { return e.vm.Close() }

type arenaExec struct {
	p       *arena.Program
	streams arena.StreamChoice // WithStreams: what was measured and chosen
}

func (e *arenaExec) run() error              { return e.p.Run() }
func (e *arenaExec) value(n *G.Node) G.Value { return e.p.Value(n) }
func (e *arenaExec) close() error            { return nil }

// StreamChoice is what WithStreams measured and chose (Chosen is 1 on one
// stream), and false for a model on one stream by default or on the
// TapeMachine.
func (m *Model) StreamChoice() (arena.StreamChoice, bool) {
	e, ok := m.exec.(*arenaExec)
	if !ok || e.streams.Chosen == 0 {
		return arena.StreamChoice{}, false
	}
	return e.streams, true
}

// Arena returns the planned program the model runs, or nil when it runs
// on the TapeMachine.
func (m *Model) Arena() *arena.Program {
	if e, ok := m.exec.(*arenaExec); ok {
		return e.p
	}
	return nil
}

// halvesSplit is what the cost model takes a kernel to gain from both
// cores when HalfBatches places the ops its halves share (the arena lab's
// figure): on costs from the model, not the clock, the placement and the
// arena are the same on every run. Measured costs moved one op of baby's
// f32 step (the loss's add) from build to build, and with it the arena
// between 35.4 and 46.5 MB (3 of 8 builds), with no measurable
// difference in speed.
const halvesSplit = 1.6
