package models

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	G "gorgonia.org/gorgonia"

	"gptlab/planner"
	"gptlab/planner/arena"
)

// OpTime is what one kind of op takes in a step of the arena program:
// the ops of that kind, their summed median times, FLOPs and bytes moved
// (as the cost model counts them: see flops and opBytes).
type OpTime struct {
	Kind  string // "matmul A×Bᵀ", "LayerNorm", "x+y", …
	Ops   int
	Time  time.Duration
	Flops float64
	Bytes float64
}

// OpProfile runs the model's arena program runs times on the batch last
// fed (Feed or Step first) and returns, per kind of op, the sum of its
// ops' median times, slowest kind first: where a step's forward and
// backward spend their time. The optimizer's update runs outside the
// program and is not in it. Timing each op adds a clock read per op, so
// the sum is close to, not equal to, a run's time.
func (m *Model) OpProfile(runs int) ([]OpTime, error) {
	p := m.Arena()
	if p == nil {
		return nil, fmt.Errorf("%w: an op profile needs the arena executor", ErrConfig)
	}
	times, err := p.Profile(runs)
	if err != nil {
		return nil, err
	}
	byKind := map[string]*OpTime{}
	for _, n := range m.g.AllNodes() {
		s, ok := p.RunsOp(n)
		if !ok || n.Op() == nil {
			continue
		}
		k := OpKind(n.Op())
		t := byKind[k]
		if t == nil {
			t = &OpTime{Kind: k}
			byKind[k] = t
		}
		t.Ops++
		t.Time += times[s]
		t.Flops += flops(n)
		t.Bytes += opBytes(n)
	}
	out := make([]OpTime, 0, len(byKind))
	for _, t := range byKind {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b OpTime) int {
		return cmp.Or(cmp.Compare(b.Time, a.Time), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// StreamCosts are the costs of the arena program's steps for the stream
// scheduler (planner.Cost, seconds) from the cost model c, not the clock:
// an op on one core beside another stream's takes c's cost (Shared), and
// with the machine to itself that over split (Alone: what its kernel gains
// from splitting across the cores). A stream assignment made on them is
// the same on every run and every machine.
func (m *Model) StreamCosts(c CostModel, split float64) ([]planner.Cost, error) {
	p := m.Arena()
	if p == nil {
		return nil, fmt.Errorf("%w: stream costs need the arena executor", ErrConfig)
	}
	return streamCosts(p, m.g, c, split)
}

// streamCosts is StreamCosts of program p, compiled from graph g.
func streamCosts(p *arena.Program, g *G.ExprGraph, c CostModel, split float64) ([]planner.Cost, error) {
	if !(split >= 1) {
		return nil, fmt.Errorf("%w: a split gain of %v; want at least 1", ErrConfig, split)
	}
	costs := make([]planner.Cost, p.Steps())
	for _, n := range g.AllNodes() {
		if s, ok := p.RunsOp(n); ok && n.Op() != nil {
			shared := c.Node(n)
			costs[s] = planner.Cost{Alone: shared / split, Shared: shared}
		}
	}
	return costs, nil
}

// StepFlops is the FLOPs of one forward and backward pass, as OpProfile
// counts them (a product's multiply-adds twice, one per output element of
// any other op): every op of the arena program, or of the graph under the
// TapeMachine. The optimizer's update is not in it.
func (m *Model) StepFlops() float64 {
	p := m.Arena()
	var fl float64
	for _, n := range m.g.AllNodes() {
		if n.Op() == nil {
			continue
		}
		if p != nil {
			if _, ok := p.RunsOp(n); !ok {
				continue
			}
		}
		fl += flops(n)
	}
	return fl
}

// OpKind names an op's kind for a profile: a matrix product by its
// transposes ("matmul Aᵀ×B"), a cast by its types, any other op by its
// name without its parameters.
func OpKind(op G.Op) string {
	s := op.String()
	switch op.(type) {
	case arena.MatMulOp:
		return "matmul " + s
	case arena.CastOp:
		return s
	}
	if strings.HasPrefix(s, "Gemm16{") { // the bf16 product: by its transposes too
		return "bf16 " + strings.TrimSuffix(strings.TrimPrefix(s, "Gemm16{"), "}")
	}
	if i := strings.IndexAny(s, "{("); i > 0 {
		s = s[:i]
	}
	return s
}
