package arena

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner"
)

// InPlacer is implemented by ops whose kernel may write the output over
// some of its inputs (an elementwise op can, a matmul cannot). The planner
// still decides whether doing so is legal: the op must be the input's last
// reader and nobody may retain it.
type InPlacer interface {
	InPlaceInputs() []int
}

// inPlaceInputs lists the inputs op may overwrite.
func inPlaceInputs(op gorgonia.Op) []int {
	if ip, ok := op.(InPlacer); ok {
		return ip.InPlaceInputs()
	}
	if reflect.TypeOf(op).String() == "gorgonia.elemBinOp" {
		return []int{0, 1}
	}
	return nil
}

// planLifetimes writes the graph as the planner's Program (one op per
// step, values named by slot), lets the planner derive lifetimes, judge
// in-place requests and place the buffers, and binds the arena.
func (p *Program) planLifetimes(ctx context.Context, retain []*gorgonia.Node, o Options) error {
	prog, err := p.program(retain, o.InPlace)
	if err != nil {
		return err
	}
	p.lifetimes = prog
	p.problem, _, err = prog.Problem(o.Alignment)
	if err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	for b, buf := range p.problem.Buffers {
		for _, name := range strings.Split(buf.ID, "/") { // in-place merges name every value
			slot, err := strconv.Atoi(name)
			if err != nil {
				return fmt.Errorf("arena: buffer %q: %w", buf.ID, err)
			}
			p.bufOf[slot] = b
		}
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
// base too). With inPlace, every op that can run in place takes the first
// input the planner allows.
func (p *Program) program(retain []*gorgonia.Node, inPlace bool) (planner.Program, error) {
	var prog planner.Program
	name := p.slotName
	planned := make([]bool, len(p.nodes)) // the slot's storage is in the arena
	for _, st := range p.steps {
		n := st.node
		op := planner.Op{Fn: opName(st.op), Out: name(st.out), Size: int64(n.Shape().TotalSize()) * int64(n.Dtype().Size())}
		for _, s := range st.in {
			op.In = append(op.In, name(s))
		}
		reason := ""
		switch {
		case st.view && planned[st.in[0]]:
			op.View = true
		case st.view:
			reason = "a view of a value outside the arena"
			op.Size = 0
		case n.IsScalar():
			reason = "scalar output (allocated once when its op has a kernel)"
			op.Size = int64(n.Dtype().Size())
		case n.Dtype() != tensor.Float32 && n.Dtype() != tensor.Float64:
			reason = fmt.Sprintf("dtype %v", n.Dtype())
		default:
			if _, ok := st.op.(gorgonia.UsePreallocDoer); !ok && !hasKernel(st.op) {
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
		s, ok := p.slots[n.ID()]
		if !ok {
			return planner.Program{}, fmt.Errorf("arena: retained node %v is not in the graph", n)
		}
		p.retained = append(p.retained, s)
		if _, isStep := p.stepOf(s); !isStep || !planned[s] {
			continue // an input, or outside the arena: nothing to keep alive
		}
		prog.Outputs = append(prog.Outputs, name(s))
		if owner[s] != s {
			prog.Outputs = append(prog.Outputs, name(owner[s]))
		}
	}
	if !inPlace {
		return prog, nil
	}
	for i, st := range p.steps {
		if prog.Ops[i].View || prog.Ops[i].Unplanned {
			continue
		}
		for _, j := range inPlaceInputs(st.op) {
			if j >= len(st.in) || !planned[st.in[j]] {
				continue
			}
			if prog.Legal(i, name(st.in[j])) == nil {
				prog.Ops[i].InPlace = name(st.in[j])
				p.inPlace++
				break
			}
		}
	}
	return prog, nil
}

// stepOf returns the step that writes slot, if an op writes it.
func (p *Program) stepOf(slot int) (int, bool) {
	for i, st := range p.steps {
		if st.out == slot {
			return i, true
		}
	}
	return 0, false
}

// opName is an op's kind without shape details: "Reshape(2, 3)" -> "Reshape".
func opName(op gorgonia.Op) string {
	s := op.String()
	if i := strings.IndexAny(s, "([{"); i > 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
