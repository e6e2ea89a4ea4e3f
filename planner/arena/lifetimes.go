package arena

import (
	"context"
	"fmt"
	"slices"

	"gorgonia.org/gorgonia"

	"gptlab/planner"
)

// InPlacer is implemented by ops whose kernel may write the output over
// some of its inputs (an elementwise op can, a matmul cannot). The planner
// still decides whether doing so is legal: the op must be the input's last
// reader and nobody may retain it.
type InPlacer interface {
	InPlaceInputs() []int
}

// planLifetimes writes the schedule as the planner's Program (one op per
// step, on the stream streams gives it: nil is one stream), lets the
// planner derive lifetimes, judge in-place requests and place the
// buffers, and binds the arena.
func (p *Program) planLifetimes(ctx context.Context, retain []*gorgonia.Node, o Options, streams []int) error {
	p.outside, p.retained, p.inPlace = nil, nil, 0
	p.bufOf = map[Value]int{}
	prog, err := p.program(retain, o.InPlace, streams)
	if err != nil {
		return err
	}
	p.lifetimes = prog
	p.problem, p.temps, err = prog.Problem(o.Alignment)
	if err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	b := 0 // the problem's buffers are the temps with storage, in order
	for _, t := range p.temps {
		if t.Kind == planner.Alias {
			continue
		}
		for _, name := range t.Values {
			v, ok := p.names[name]
			if !ok {
				return fmt.Errorf("arena: the planner returned value %q, which the program does not have", name)
			}
			p.bufOf[v] = b
		}
		b++
	}
	plan, err := o.Algorithm.Run(ctx, p.problem)
	if err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	p.plan = plan
	p.arena = make([]float64, (plan.Peak+7)/8)
	p.bind()
	return nil
}

// program builds the planner's view of the schedule. Ops whose outputs
// cannot live in the arena are Unplanned (and listed in p.outside); views
// of planned values are views; retained nodes are outputs (for a view, its
// base too); each op runs on the stream streams gives it (nil: stream 0).
// With inPlace, every op that can run in place takes the first input the
// planner allows.
func (p *Program) program(retain []*gorgonia.Node, inPlace bool, streams []int) (planner.Program, error) {
	var prog planner.Program
	p.names = make(map[string]Value, len(p.vals))
	for v := range p.vals {
		p.names[p.name(Value(v))] = Value(v)
	}
	planned := make([]bool, len(p.vals)) // the value's storage is in the arena
	for _, st := range p.steps {
		n, dt := st.node, p.vals[st.out].dtype
		op := planner.Op{Fn: opName(st.op), Out: p.name(st.out), Size: int64(n.Shape().TotalSize()) * dt.Size()}
		if streams != nil {
			op.Stream = streams[len(prog.Ops)]
		}
		for _, s := range st.in {
			op.In = append(op.In, p.name(s))
		}
		reason := ""
		switch {
		case st.view && planned[st.in[0]]:
			op.View = true
		case st.view:
			reason = "a view of a value outside the arena"
			op.Size = 0
		case n.IsScalar():
			reason = "a gorgonia scalar (no storage to bind)"
			op.Size = max(dt.Size(), int64(n.Dtype().Size()))
		case dt == 0:
			reason = fmt.Sprintf("dtype %v", n.Dtype())
		default:
			_, isKernel := st.op.(Kernel)
			_, prealloc := st.op.(gorgonia.UsePreallocDoer)
			if !isKernel && !prealloc {
				reason = fmt.Sprintf("%T has neither a kernel nor UsePreallocDo", st.op)
			}
		}
		if reason != "" {
			op.Unplanned = true
			p.outside = append(p.outside, Outside{Node: n.Name(), Op: st.op.String(), Bytes: op.Size, Reason: reason})
		}
		planned[st.out] = !op.Unplanned
		prog.Ops = append(prog.Ops, op)
	}
	owner := p.storageOwner()
	for _, n := range retain {
		v, ok := p.byNode[n.ID()]
		if !ok {
			return planner.Program{}, fmt.Errorf("arena: retained node %v is not in the graph", n)
		}
		p.retained = append(p.retained, v)
		if p.vals[v].step < 0 || !planned[v] {
			continue // an input, or outside the arena: nothing to keep alive
		}
		for _, keep := range []Value{v, owner[v]} {
			if name := p.name(keep); !slices.Contains(prog.Outputs, name) {
				prog.Outputs = append(prog.Outputs, name)
			}
		}
	}
	if !inPlace {
		return prog, nil
	}
	for i, st := range p.steps {
		ip, ok := st.op.(InPlacer)
		if !ok || prog.Ops[i].View || prog.Ops[i].Unplanned {
			continue
		}
		for _, j := range ip.InPlaceInputs() {
			if j >= len(st.in) || !planned[st.in[j]] || p.vals[st.in[j]].dtype != p.vals[st.out].dtype {
				continue
			}
			if prog.Legal(i, p.name(st.in[j])) == nil {
				prog.Ops[i].InPlace = p.name(st.in[j])
				p.inPlace++
				break
			}
		}
	}
	return prog, nil
}

// storageOwner maps every value to the value whose storage it is (itself,
// or the base of a view).
func (p *Program) storageOwner() []Value {
	owner := make([]Value, len(p.vals))
	for i := range owner {
		owner[i] = Value(i)
	}
	for _, st := range p.steps {
		if st.view {
			owner[st.out] = owner[st.in[0]]
		}
	}
	return owner
}

// opName is an op's kind for reports: its Name when it has one, else its
// String without shape details ("Reshape(2, 3)" -> "Reshape").
func opName(op gorgonia.Op) string {
	if n, ok := op.(interface{ Name() string }); ok {
		return n.Name()
	}
	s := op.String()
	for i, c := range s {
		if (c == '(' || c == '[' || c == '{') && i > 0 {
			return s[:i]
		}
	}
	return s
}
