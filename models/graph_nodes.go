package models

import G "gorgonia.org/gorgonia"

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
