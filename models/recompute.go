package models

import (
	"fmt"
	"strings"

	G "gorgonia.org/gorgonia"

	"gptlab/planner/arena"
)

// Pass is one step of a training step's schedule over the chain of
// segments (Chain): the forward of segment Seg (its first run, or a
// recomputation) or its backward.
type Pass struct {
	Seg      int
	Backward bool
}

// String is "F3" or "B3".
func (p Pass) String() string {
	if p.Backward {
		return fmt.Sprintf("B%d", p.Seg)
	}
	return fmt.Sprintf("F%d", p.Seg)
}

// StepSchedule is how a training step runs the chain: the passes in order,
// and whether each layer's attention core is recomputed for its backward.
//
// A forward pass of segment i reads the output of the latest forward of
// segment i-1; the backward of segment i reads the activations of the
// latest forward of i and the gradient of its output (from the backward
// of i+1; the loss's 1 for the head). What the step keeps follows from
// that: a value lives until its last reader, so a forward whose
// activations no backward reads leaves only its output behind, and that
// only while a later forward or backward still reads it. The plain step
// is F0 … F(S-1), B(S-1) … B0; checkpointing inserts recomputations
// (forwards again) before the backwards that need them. With Selective,
// the backward of an attention half reads the (B*H, T, T) scores,
// probabilities and dropout output recomputed from q and k (Megatron's
// selective recomputation) instead of the forward's, which then die as
// soon as the forward is past them.
type StepSchedule struct {
	Passes    []Pass
	Selective bool
}

// String lists the passes: "F0 F1 B1 B0".
func (s StepSchedule) String() string {
	parts := make([]string, len(s.Passes))
	for i, p := range s.Passes {
		parts[i] = p.String()
	}
	out := strings.Join(parts, " ")
	if s.Selective {
		out += " (selective)"
	}
	return out
}

// PlainStepSchedule is the step without recomputation: every forward, then
// every backward.
func PlainStepSchedule(cfg Config) StepSchedule {
	S := len(Chain(cfg))
	var s StepSchedule
	for i := range S {
		s.Passes = append(s.Passes, Pass{Seg: i})
	}
	for i := S - 1; i >= 0; i-- {
		s.Passes = append(s.Passes, Pass{Seg: i, Backward: true})
	}
	return s
}

// CheckpointStepSchedule keeps the inputs of the layers in keep (layer 0's
// input, the embedding's output, is always kept) through the forward, and
// recomputes each stretch between kept inputs just before its backward,
// as Chen et al.'s sublinear-memory training does. The last stretch is
// not recomputed: its activations are still there when its backward
// starts.
func CheckpointStepSchedule(cfg Config, keep []int) (StepSchedule, error) {
	L := cfg.Layers
	starts := []int{0} // kept layer inputs, ascending
	for _, l := range keep {
		if l < 0 || l >= L {
			return StepSchedule{}, fmt.Errorf("%w: keep layer %d of %d", ErrConfig, l, L)
		}
		if l > starts[len(starts)-1] {
			starts = append(starts, l)
		} else if l != 0 && l != starts[len(starts)-1] {
			return StepSchedule{}, fmt.Errorf("%w: kept layers %v are not ascending", ErrConfig, keep)
		}
	}
	S := len(Chain(cfg))
	seg := func(layer int) int { return 1 + 2*layer } // the attention half of a layer
	var s StepSchedule
	for i := range S {
		s.Passes = append(s.Passes, Pass{Seg: i})
	}
	end := S // one past the last segment of the current stretch
	for k := len(starts) - 1; k >= 0; k-- {
		from := seg(starts[k])
		if end != S { // recompute the stretch from its kept input
			for i := from; i < end; i++ {
				s.Passes = append(s.Passes, Pass{Seg: i})
			}
		}
		for i := end - 1; i >= from; i-- {
			s.Passes = append(s.Passes, Pass{Seg: i, Backward: true})
		}
		end = from
	}
	s.Passes = append(s.Passes, Pass{Seg: 0, Backward: true}) // the embedding
	return s, s.Validate(cfg)
}

// Validate reports a schedule that does not compute the step: every
// segment's backward once, last segment first, each after a forward of
// its segment and the backward of the next; every forward after a forward
// of the segment before (the embedding reads the tokens, and is never
// recomputed: its output is the chain's stored input).
func (s StepSchedule) Validate(cfg Config) error {
	S := len(Chain(cfg))
	fwd := make([]bool, S)
	next := S - 1 // the backward due next
	for i, p := range s.Passes {
		switch {
		case p.Seg < 0 || p.Seg >= S:
			return fmt.Errorf("%w: pass %d (%v): segment outside [0, %d)", ErrConfig, i, p, S)
		case p.Backward && p.Seg != next:
			return fmt.Errorf("%w: pass %d (%v): backward of segment %d due", ErrConfig, i, p, next)
		case p.Backward && !fwd[p.Seg]:
			return fmt.Errorf("%w: pass %d (%v): no forward of its segment before it", ErrConfig, i, p)
		case !p.Backward && p.Seg > 0 && !fwd[p.Seg-1]:
			return fmt.Errorf("%w: pass %d (%v): no forward of segment %d before it", ErrConfig, i, p, p.Seg-1)
		case !p.Backward && p.Seg == 0 && fwd[0]:
			return fmt.Errorf("%w: pass %d (%v): the embedding is never recomputed", ErrConfig, i, p)
		case !p.Backward && p.Seg > next:
			return fmt.Errorf("%w: pass %d (%v): a forward after its segment's backward", ErrConfig, i, p)
		}
		if p.Backward {
			next--
		} else {
			fwd[p.Seg] = true
		}
	}
	if next != -1 {
		return fmt.Errorf("%w: the schedule ends before the backward of segment %d", ErrConfig, next)
	}
	return nil
}

// segCopy is one forward of a segment in the graph.
type segCopy struct {
	in     *G.Node    // the input (nil for the embedding)
	out    *G.Node    // the output: the next residual stream, or the head's loss
	logits *G.Node    // the head's
	cores  []attnCore // an attention half's core
}

// segment adds one forward of seg on input in.
func (n *net) segment(seg Segment, in, idx, pos, tgt *G.Node) segCopy {
	c := segCopy{in: in}
	first := len(n.cores)
	switch seg.Kind {
	case SegEmbed:
		c.out = n.embed(idx, pos) // (B*T, C)
	case SegAttn:
		c.out = n.attnHalf(in, seg.Layer) // (B*T, C)
	case SegMLP:
		c.out = n.mlpHalf(in, seg.Layer) // (B*T, C)
	case SegHead:
		c.logits = n.head(in)                                                        // (B*T, V)
		c.out = n.do(func() (*G.Node, error) { return CrossEntropy(c.logits, tgt) }) // (1)
	}
	c.cores = n.cores[first:]
	return c
}

// segParams are the parameters segment seg reads, in Params order.
func segParams(p *Params, seg Segment) []string {
	var prefixes []string
	switch seg.Kind {
	case SegEmbed:
		prefixes = []string{"transformer.wte.", "transformer.wpe."}
	case SegAttn:
		pre := fmt.Sprintf("transformer.h.%d.", seg.Layer)
		prefixes = []string{pre + "ln_1.", pre + "attn."}
	case SegMLP:
		pre := fmt.Sprintf("transformer.h.%d.", seg.Layer)
		prefixes = []string{pre + "ln_2.", pre + "mlp."}
	case SegHead:
		prefixes = []string{"transformer.ln_f.", "transformer.wte."}
	}
	var out []string
	for _, name := range p.Names() {
		for _, pre := range prefixes {
			if strings.HasPrefix(name, pre) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// scheduled builds a training step by its schedule into n's graph: the
// loss (of the first forward of the head), the logits, and every
// parameter's gradient nodes (in Params order; c_attn's three row blocks
// each). Each backward differentiates the latest forward of its segment
// with respect to that forward's input and the segment's parameters.
func (n *net) scheduled(s StepSchedule, idx, pos, tgt, dloss *G.Node) (loss, logits *G.Node, grads [][]*G.Node, err error) {
	if err := s.Validate(n.cfg); err != nil {
		return nil, nil, nil, err
	}
	chain := Chain(n.cfg)
	latest := make([]*segCopy, len(chain))
	dy := make([]*G.Node, len(chain)) // the gradient of each segment's output
	dy[len(chain)-1] = dloss
	contrib := map[string][]G.Nodes{} // parameter -> one gradient per backward reading it
	for i, pass := range s.Passes {
		if n.err != nil {
			break
		}
		seg := chain[pass.Seg]
		if !pass.Backward {
			var in *G.Node
			if pass.Seg > 0 {
				in = latest[pass.Seg-1].out
				if latest[pass.Seg] != nil { // a recomputation: its own view, or gorgonia merges it with the first pass
					in = n.do(func() (*G.Node, error) { return arena.Alias(in, i+1) })
				}
			}
			c := n.segment(seg, in, idx, pos, tgt)
			if latest[pass.Seg] == nil && seg.Kind == SegHead {
				loss, logits = c.out, c.logits
			}
			latest[pass.Seg] = &c
			continue
		}
		c := latest[pass.Seg]
		names := segParams(n.p, seg)
		var wrt G.Nodes
		for _, name := range names {
			wrt = append(wrt, n.wrt[name]...)
		}
		if c.in != nil {
			wrt = append(wrt, c.in)
		}
		var read func(*G.Node) (*G.Node, error)
		if s.Selective && len(c.cores) > 0 {
			read = n.recomputeCores(c.cores, i+1)
		}
		gs, err := BackwardReading(G.Nodes{c.out}, G.Nodes{dy[pass.Seg]}, wrt, read)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%v: %w", pass, err)
		}
		k := 0
		for _, name := range names {
			parts := len(n.wrt[name])
			contrib[name] = append(contrib[name], gs[k:k+parts])
			k += parts
		}
		if c.in != nil {
			dy[pass.Seg-1] = gs[k]
		}
	}
	if n.err != nil {
		return nil, nil, nil, n.err
	}
	for _, name := range n.p.Names() {
		cs := contrib[name]
		if len(cs) == 0 {
			return nil, nil, nil, fmt.Errorf("gradients: no backward reads %s", name)
		}
		parts := make([]*G.Node, len(cs[0]))
		for j := range parts {
			var terms G.Nodes
			for _, c := range cs {
				terms = append(terms, c[j])
			}
			if parts[j], err = sumNodes(terms); err != nil {
				return nil, nil, nil, err
			}
		}
		grads = append(grads, parts)
	}
	return loss, logits, grads, nil
}

// recomputeCores is the read of a selective backward: the probabilities
// and dropout output of each core are recomputed from views of its q and
// k (and the same mask) the first time the backward reads them.
func (n *net) recomputeCores(cores []attnCore, tag int) func(*G.Node) (*G.Node, error) {
	again := map[*G.Node]*attnCore{}
	return func(v *G.Node) (*G.Node, error) {
		for i := range cores {
			c := &cores[i]
			if v != c.probs && v != c.dropped {
				continue
			}
			r, ok := again[c.probs]
			if !ok {
				q, err := arena.Alias(c.q, tag)
				if err != nil {
					return nil, err
				}
				k, err := arena.Alias(c.k, tag)
				if err != nil {
					return nil, err
				}
				rc := n.attnScores(attnCore{layer: c.layer, q: q, k: k, mask: c.mask, scale: c.scale})
				if n.err != nil {
					return nil, n.err
				}
				r = &rc
				again[c.probs] = r
			}
			if v == c.probs {
				return r.probs, nil
			}
			return r.dropped, nil
		}
		return v, nil
	}
}
