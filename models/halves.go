package models

// halves.go: a training step cut into two halves of its batch
// (HalfBatches), one for each stream. The two cores of a small machine
// pass data to each other slowly (a 2-vCPU Zen 5 here reads a buffer the
// other core wrote at about 25 GB/s against 70 from its own cache), and
// an op split across both cores waits at its end for the slower one. Two
// streams that each run half the batch's sequences through every layer
// share nothing but the weights until the loss and the gradients' sums,
// so each core keeps its half's activations, and an op waits for the
// other core only there; the scheduler places the ops they share (the
// weights' casts, those sums).

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// buildHalves builds the forward of a halved step (HalfBatches): the
// batch's first B/2 sequences and its last B/2, each from inputs of their
// own (views of the model's token buffers) through every layer to their
// logits and their share of the mean loss (CrossEntropyOf), which are
// added. The halves read the same parameter nodes, so the backward sums
// each weight's gradient over them. A row's values, and the dropout masks
// (drawn where the row sits in the whole batch), are bitwise those of the
// whole-batch graph; only the sums across rows (the loss, the weights' and
// biases' gradients) add the halves' parts instead of every row in order.
func (m *Model) buildHalves(n *builder) *G.Node {
	h, B := m.B*m.T/2, m.B/2
	n.B, n.rows = B, map[string]*G.Node{}
	var loss [2]*G.Node
	for k := range 2 {
		n.seq0 = k * B
		idx := n.input(fmt.Sprint("idx.", k), m.idx[k*h:(k+1)*h], h)
		pos := n.input(fmt.Sprint("pos.", k), m.pos[k*h:(k+1)*h], h)
		tgt := n.input(fmt.Sprint("targets.", k), m.tgt[k*h:(k+1)*h], h)
		m.half[k] = [2]*G.Node{idx, pos}
		x := n.embed(idx, pos) // (B/2*T, C)
		for l := range m.cfg.Layers {
			x = n.block(x, l) // (B/2*T, C)
		}
		m.halfLogits[k] = n.head(x)                                                                      // (B/2*T, V)
		loss[k] = n.do(func() (*G.Node, error) { return ops.CrossEntropyOf(m.halfLogits[k], tgt, 2*h) }) // (1)
	}
	n.B, n.seq0 = m.B, 0
	if n.err != nil {
		return nil
	}
	// The loss as it is (a hook's output would round it to 16 bits). Its
	// add joins the halves where the backward starts: the stream running
	// it waits for the other half's forward (0.8-1.4 ms in the baby bf16
	// step's timelines), but it also bounds what may run beside what, and
	// so the arena: the shares added by Step instead took baby's
	// two-stream arena from 35.4 to 46.5 MB (62.2 with the gradients'
	// sums scheduled last), for a step time within the noise.
	sum, err := arena.Add(loss[0], loss[1]) // (1)
	if err != nil {
		n.err = err
	}
	return sum
}

// halfPins is the stream of each step of a halved step's program p:
// 0 or 1 for a step that reads only its half's inputs (through any chain
// of ops), -1 for one that reads both halves or neither (the weights'
// casts, the gradients' sums, the loss), which the scheduler places.
func (m *Model) halfPins(p *arena.Program) []int {
	pin := make([]int, p.Steps())
	for i := range pin {
		pin[i] = -1
	}
	seen := map[int64]uint8{} // bit k: reads half k's inputs
	for k, in := range m.half {
		for _, x := range in {
			seen[x.ID()] = 1 << k
		}
	}
	var halves func(n *G.Node) uint8
	halves = func(n *G.Node) uint8 {
		if h, ok := seen[n.ID()]; ok {
			return h
		}
		var h uint8
		for it := m.g.From(n.ID()); it.Next(); {
			h |= halves(it.Node().(*G.Node))
		}
		seen[n.ID()] = h
		return h
	}
	for _, n := range m.g.AllNodes() {
		i, ok := p.RunsOp(n)
		if !ok {
			continue
		}
		switch halves(n) {
		case 1:
			pin[i] = 0
		case 2:
			pin[i] = 1
		}
	}
	return pin
}
