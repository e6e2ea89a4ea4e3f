package models

import (
	"fmt"
	"slices"
	"sort"

	G "gorgonia.org/gorgonia"
)

// GradNodes are the graph nodes of every parameter gradient (the three row
// blocks of c_attn count as three), in parameter order; nil for an
// evaluation model. An executor other than the TapeMachine retains them.
func (m *Model) GradNodes() G.Nodes {
	var out G.Nodes
	for _, gp := range m.grads {
		out = append(out, gp.nodes...)
	}
	return out
}

// ParamNodes are the parameter nodes GradNodes differentiate, one for one
// (c_attn's weight and bias each enter as three row blocks).
func (m *Model) ParamNodes() G.Nodes { return m.wrt }

// GradReady is one parameter's gradient in the schedule of a training
// Step: final once the op at position Step has run (the last of its parts,
// for c_attn's three row blocks).
type GradReady struct {
	Name string
	Step int
}

// GradSchedule lists every parameter in the order its gradient becomes
// final in the arena's schedule of a training Step: the backward runs from
// the head to the embeddings, so ln_f's gradients are ready long before
// the first layer's. Data parallelism starts a bucket's all-reduce as soon
// as all of its gradients are ready. It needs the arena executor.
func (m *Model) GradSchedule() ([]GradReady, error) {
	p := m.Arena()
	if p == nil || !m.train {
		return nil, fmt.Errorf("%w: a gradient schedule needs a training model on the arena executor", ErrConfig)
	}
	out := make([]GradReady, len(m.grads))
	for i, gp := range m.grads {
		out[i] = GradReady{Name: m.params.Names()[i], Step: -1}
		for _, n := range gp.nodes {
			s, ok := p.StepOf(n)
			if !ok {
				return nil, fmt.Errorf("gradient of %s is not computed by the arena", out[i].Name)
			}
			out[i].Step = max(out[i].Step, s)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Step < out[b].Step })
	return out, nil
}

// OnGradReady arranges for f(name) to be called during every training
// Step, on the goroutine running it, as soon as the gradient of the named
// parameter is final (GradSchedule's moment): Grad(name) then reads its
// value for this step, while the rest of the backward goes on. It needs
// the arena executor.
func (m *Model) OnGradReady(f func(name string)) error {
	sched, err := m.GradSchedule()
	if err != nil {
		return err
	}
	p := m.Arena()
	for _, r := range sched {
		i := m.params.index[r.Name]
		name := r.Name
		last := slices.MaxFunc(m.grads[i].nodes, func(a, b *G.Node) int {
			sa, _ := p.StepOf(a)
			sb, _ := p.StepOf(b)
			return sa - sb
		})
		if err := p.WhenWritten(G.Nodes{last}, func(int) { f(name) }); err != nil {
			return err
		}
	}
	return nil
}
