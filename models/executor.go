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
}

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
	if o.tape {
		return &tapeExec{vm: G.NewTapeMachine(g)}, nil
	}
	if o.arena.Algorithm.Place == nil {
		o.arena.Algorithm = defaultPlanner()
	}
	prog, err := arena.Compile(context.Background(), g, retain, o.arena)
	if err != nil {
		return nil, fmt.Errorf("plan the GPT's arena: %w", err)
	}
	return &arenaExec{p: prog}, nil
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

type arenaExec struct{ p *arena.Program }

func (e *arenaExec) run() error              { return e.p.Run() }
func (e *arenaExec) value(n *G.Node) G.Value { return e.p.Value(n) }
func (e *arenaExec) close() error            { return nil }

// Arena returns the planned program the model runs, or nil when it runs
// on the TapeMachine.
func (m *Model) Arena() *arena.Program {
	if e, ok := m.exec.(*arenaExec); ok {
		return e.p
	}
	return nil
}
