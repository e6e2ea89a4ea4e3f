package models

// recompute.go: what a training step recomputes: step schedules
// (StepSchedule: forwards, recomputations, backwards in order), the
// scheduled build of a Model, and Megatron's selective recomputation of
// attention cores, recorded by the passLog hook.

import (
	"fmt"
	"slices"
	"strings"

	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
	"gptlab/planner/arena"
	"gptlab/planner/recompute"
)

// Pass is one step of a training step's schedule over the chain of
// segments (Chain): the forward of segment Seg (its first run, or a
// recomputation) or its backward. A Selective forward of an attention
// half keeps all but its core: the backward that reads it recomputes the
// (B*H, T, T) probabilities and dropout output from q and k
// (Megatron's selective recomputation), and the forward's own die as
// soon as the forward is past them.
type Pass struct {
	Seg       int
	Backward  bool
	Selective bool
}

// String is "F3", "F3s" (selective) or "B3".
func (p Pass) String() string {
	switch {
	case p.Backward:
		return fmt.Sprintf("B%d", p.Seg)
	case p.Selective:
		return fmt.Sprintf("F%ds", p.Seg)
	}
	return fmt.Sprintf("F%d", p.Seg)
}

// StepSchedule is how a training step runs the chain: the passes in
// order.
//
// A forward pass of segment i reads the output of the latest forward of
// segment i-1; the backward of segment i reads the activations of the
// latest forward of i and the gradient of its output (from the backward
// of i+1; the loss's 1 for the head). What the step keeps follows from
// that: a value lives until its last reader, so a forward whose
// activations no backward reads leaves only its output behind, and that
// only while a later forward or backward still reads it. The plain step
// is F0 … F(S-1), B(S-1) … B0; checkpointing inserts recomputations
// (forwards again) before the backwards that need them.
type StepSchedule struct {
	Passes []Pass
}

// String lists the passes: "F0 F1 B1 B0".
func (s StepSchedule) String() string {
	parts := make([]string, len(s.Passes))
	for i, p := range s.Passes {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

// Selective is s with every forward of an attention half selective.
func (s StepSchedule) Selective(cfg Config) StepSchedule {
	chain := Chain(cfg)
	out := StepSchedule{Passes: slices.Clone(s.Passes)}
	for i, p := range out.Passes {
		if !p.Backward && p.Seg < len(chain) && chain[p.Seg].Kind == SegAttn {
			out.Passes[i].Selective = true
		}
	}
	return out
}

// FromMoves is the step schedule of a chain schedule whose links are the
// segments after the embedding (link i is segment i+1): the embedding's
// forward first and its backward last around the moves; a move's partial
// save is a selective forward.
func FromMoves(moves recompute.Moves) StepSchedule {
	s := StepSchedule{Passes: []Pass{{Seg: 0}}}
	for _, m := range moves {
		s.Passes = append(s.Passes, Pass{Seg: m.Link + 1, Backward: m.Backward, Selective: m.Part})
	}
	s.Passes = append(s.Passes, Pass{Seg: 0, Backward: true})
	return s
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
		case p.Selective && (p.Backward || Chain(cfg)[p.Seg].Kind != SegAttn):
			return fmt.Errorf("%w: pass %d (%v): only an attention half's forward can be selective", ErrConfig, i, p)
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
	in        *G.Node    // the input (nil for the embedding)
	out       *G.Node    // the output: the next residual stream, or the head's loss
	logits    *G.Node    // the head's
	cores     []attnCore // an attention half's core
	selective bool       // its backward recomputes the cores
}

// passRec is what one pass of a scheduled step added to the graph.
type passRec struct {
	Pass
	ops   []*G.Node   // the op nodes it made, in order
	out   *G.Node     // a forward's output; a backward's input gradient (nil for the embedding's)
	core  []*G.Node   // a forward's attention core ops
	grads []*G.Node   // a backward's parameter gradients
	masks []maskInput // a forward's dropout masks, in the order it draws them
	again []*G.Node   // a backward's recomputed attention cores (selective)
}

// passLog is the hook of a scheduled build: it records the attention
// cores the layers make (a selective backward recomputes them) and the
// dropout masks of the pass being built (a stateful generator draws them
// pass by pass).
type passLog struct {
	noHook
	cores []attnCore  // every attention core built, in order
	masks []maskInput // the masks of the pass being built
}

func (l *passLog) core(c attnCore)   { l.cores = append(l.cores, c) }
func (l *passLog) mask(mk maskInput) { l.masks = append(l.masks, mk) }

// segment adds one forward of seg on input in (again: a recomputation).
func (n *builder) segment(log *passLog, seg Segment, in, idx, pos, tgt *G.Node, again bool) segCopy {
	c := segCopy{in: in}
	first := len(log.cores)
	for _, h := range n.hooks {
		h.forward(n, seg, in, again)
	}
	switch seg.Kind {
	case SegEmbed:
		c.out = n.embed(idx, pos) // (B*T, C)
	case SegAttn:
		c.out = n.attnHalf(in, seg.Layer) // (B*T, C)
	case SegMLP:
		c.out = n.mlpHalf(in, seg.Layer) // (B*T, C)
	case SegHead:
		c.logits = n.head(in)                                                            // (B*T, V)
		c.out = n.do(func() (*G.Node, error) { return ops.CrossEntropy(c.logits, tgt) }) // (1)
	}
	c.cores = log.cores[first:]
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

// scheduled builds a training step by its schedule into n's graph, whose
// hooks include log: the loss (of the first forward of the head), the
// logits, every parameter's gradient nodes (in Params order; c_attn's
// three row blocks each), and what each pass added. Each backward
// differentiates the latest forward of its segment with respect to that
// forward's input and the segment's parameters.
func (n *builder) scheduled(s StepSchedule, log *passLog, idx, pos, tgt, dloss *G.Node) (loss, logits *G.Node, grads [][]*G.Node, passes []passRec, err error) {
	if err := s.Validate(n.cfg); err != nil {
		return nil, nil, nil, nil, err
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
		rec := passRec{Pass: pass}
		made := len(n.g.AllNodes())
		log.masks = nil
		record := func() {
			for _, x := range n.g.AllNodes()[made:] {
				if x.Op() != nil && n.g.From(x.ID()).Len() > 0 && !n.unrun[x] {
					rec.ops = append(rec.ops, x)
				}
			}
			rec.masks = log.masks
			passes = append(passes, rec)
		}
		seg := chain[pass.Seg]
		if !pass.Backward {
			var in *G.Node
			if pass.Seg > 0 {
				in = latest[pass.Seg-1].out
				if latest[pass.Seg] != nil { // a recomputation: its own view, or gorgonia merges it with the first pass
					in = n.do(func() (*G.Node, error) { return n.view(in, i+1) })
				}
			}
			n.fuse = pass.Selective && n.storesF32()
			c := n.segment(log, seg, in, idx, pos, tgt, latest[pass.Seg] != nil)
			n.fuse = false
			c.selective = pass.Selective
			if latest[pass.Seg] == nil && seg.Kind == SegHead {
				loss, logits = c.out, c.logits
			}
			latest[pass.Seg] = &c
			rec.out = c.out
			for _, core := range c.cores {
				rec.core = append(rec.core, core.probs)
				if core.dropped != core.probs {
					rec.core = append(rec.core, core.dropped)
				}
			}
			record()
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
		var again func(*G.Node) (*G.Node, error)
		if c.selective && len(c.cores) > 0 {
			again = n.recomputeCores(c.cores, i+1, &rec.again)
		}
		gs, err := BackwardReading(G.Nodes{c.out}, G.Nodes{dy[pass.Seg]}, wrt, readThrough(again, n.reread), n.standIn)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%v: %w", pass, err)
		}
		k := 0
		for _, name := range names {
			parts := len(n.wrt[name])
			contrib[name] = append(contrib[name], gs[k:k+parts])
			rec.grads = append(rec.grads, gs[k:k+parts]...)
			k += parts
		}
		if c.in != nil {
			dy[pass.Seg-1] = gs[k]
			rec.out = gs[k]
		}
		record()
	}
	if n.err != nil {
		return nil, nil, nil, nil, n.err
	}
	for _, name := range n.p.Names() {
		cs := contrib[name]
		if len(cs) == 0 {
			return nil, nil, nil, nil, fmt.Errorf("gradients: no backward reads %s", name)
		}
		parts := make([]*G.Node, len(cs[0]))
		for j := range parts {
			var terms G.Nodes
			for _, c := range cs {
				terms = append(terms, c[j])
			}
			if parts[j], err = sumNodes(terms); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		grads = append(grads, parts)
	}
	return loss, logits, grads, passes, nil
}

// recomputeCores is the read of a selective backward: the probabilities
// and dropout output of each core are recomputed from views of its q and
// k (and the same mask) the first time the backward reads them.
func (n *builder) recomputeCores(cores []attnCore, tag int, made *[]*G.Node) func(*G.Node) (*G.Node, error) {
	again := map[*G.Node]*attnCore{}
	return func(v *G.Node) (*G.Node, error) {
		for i := range cores {
			c := &cores[i]
			isProbs, isDropped := n.same(v, c.probs), n.same(v, c.dropped)
			if !isProbs && !isDropped {
				continue
			}
			r, ok := again[c.probs]
			if !ok {
				q, err := n.view(c.q, tag)
				if err != nil {
					return nil, err
				}
				k, err := n.view(c.k, tag)
				if err != nil {
					return nil, err
				}
				rc := attnCore{layer: c.layer, heads: c.heads, q: q, k: k, drop: c.drop}
				first := len(n.g.AllNodes())              // what the recomputation runs, past its views of q and k
				rc.probs = n.causalSoftmax(q, k, c.heads) // (B*H, T, T)
				rc.dropped = rc.drop.apply(n, rc.probs)   // the first forward's mask (B*H, T, T)
				if n.err != nil {
					return nil, n.err
				}
				r = &rc
				again[c.probs] = r
				for _, x := range n.g.AllNodes()[first:] { // the core's ops (and a policy's casts of them)
					if x.Op() != nil {
						*made = append(*made, x)
					}
				}
			}
			if isProbs {
				return r.probs, nil
			}
			return r.dropped, nil
		}
		return v, nil
	}
}

// view is a recomputation's input x, read again after the forward that
// made it: what the hooks read for it (under a 16-bit policy the cast up
// of x's 16-bit copy, so the forward's float32 copy of x still dies in
// the forward and what the recomputation keeps waiting is 16-bit), or an
// alias of x tagged with the pass.
func (n *builder) view(x *G.Node, tag int) (*G.Node, error) {
	if up, err := n.reread(x); err != nil || up != nil {
		return up, err
	}
	return arena.Alias(x, tag)
}

// readThrough is the backward's read under both passes: a core the
// selective pass recomputes is read as its recomputation, and a value
// the precision pass stores in 16 bits (the recomputation's too) as the
// cast up of its 16-bit copy. Either may be nil.
func readThrough(again, stored func(*G.Node) (*G.Node, error)) func(*G.Node) (*G.Node, error) {
	if again == nil {
		return stored
	}
	if stored == nil {
		return again
	}
	return func(v *G.Node) (*G.Node, error) {
		r, err := again(v)
		if err != nil {
			return nil, err
		}
		if r == nil {
			r = v
		}
		up, err := stored(r)
		if err != nil || up != nil {
			return up, err
		}
		return r, nil
	}
}
