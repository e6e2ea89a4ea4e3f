package models

import (
	"errors"
	"fmt"
	"slices"

	"gptlab/models/ops"
	"gptlab/planner/arena"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia panics at start on Go 1.26 without it
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Model is the GPT's graph for one batch shape (B, T), built from the
// layer functions of layers.go and run from one planned arena (package
// planner/arena) or, for reference, by gorgonia's TapeMachine. Its
// parameter nodes are bound to views of a Params, so an optimizer that
// updates the Params in place is seen by the next Step. With train, the
// graph holds the backward pass (Backward, seeded by a dloss input of 1)
// and, when the config's dropout is positive, one mask input per dropout
// site.
//
// The c_attn weight and bias enter the graph as three row blocks (q, k, v:
// views of the same memory), so no split op is needed; Grad joins the
// three gradients back into the [3C, C] layout.
type Model struct {
	cfg    Config
	params *Params
	B, T   int
	train  bool

	g    *G.ExprGraph
	exec executor

	idx, pos, tgt []int // backing of the Int input tensors (B*T)

	logits, loss *G.Node
	// A halved step (HalfBatches) has no logits node: halfLogits are its
	// halves' logits, half their token and position inputs, and logitsBuf
	// the two joined (Logits).
	halfLogits [2]*G.Node
	half       [2][2]*G.Node
	logitsBuf  []float32
	grads      []gradParts // per parameter, in Names order
	wrt        G.Nodes     // the parameter nodes differentiated, in GradNodes order
	joined     [][]float32 // gradient buffers of split parameters

	masks   []maskInput      // every dropout mask input (stateful masks), filled by Feed
	mp      *mixed           // the 16-bit policy's pass (mixed.go), or nil
	passes  []passRec        // a scheduled step's passes, as built (recompute.go)
	unrun   map[*G.Node]bool // the chains of ops fused ops stand in for (never run)
	rngOpts RNGOptions
	rng     *stream        // the stateful masks' generator, made at the first Feed
	extra   []*G.Node      // nodes run for their effect (a RunningMean's updates)
	dropKey ops.DropoutKey // the seed and step of the next Step's masks, read by the graph's dropout ops
}

// gradParts are the graph gradients of one parameter: one node, or the
// three row blocks of c_attn in order.
type gradParts struct {
	nodes []*G.Node
}

// NewModel compiles the graph for batches of B sequences of length T
// (1 <= T <= cfg.Block) on the parameters p, which must have been made
// for cfg's shape. With train it also builds every parameter's gradient.
//
// By default the graph runs from one planned arena (package
// planner/arena); WithTapeMachine selects gorgonia's TapeMachine, which
// the tests keep as the reference.
func NewModel(cfg Config, p *Params, B, T int, train bool, opts ...ModelOption) (*Model, error) {
	o := modelOptions{arena: defaultArena()}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkShape(cfg, p, B, T); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, params: p, B: B, T: T, train: train, g: G.NewGraph(), rngOpts: o.rng}
	if (o.rng.Kind == Stateful || o.stat != nil) && o.schedule == nil {
		return nil, fmt.Errorf("%w: stateful dropout masks and running means need a step schedule (WithStepSchedule)", ErrConfig)
	}
	if o.streams == HalfBatches && (!train || B%2 != 0 || o.schedule != nil) {
		return nil, fmt.Errorf("%w: half batches are for a training step without a step schedule, of an even batch (B = %d)", ErrConfig, B)
	}
	if err := m.build(o); err != nil {
		return nil, fmt.Errorf("build GPT graph: %w", err)
	}
	if o.schedule != nil {
		o.arena.Order = opsInOrder(m.g, m.unrun) // the order the schedule built them in
	}
	retain := append(G.Nodes{m.loss}, m.logitNodes()...)
	retain = append(retain, m.GradNodes()...)
	retain = append(retain, m.extra...)
	var pins func(*arena.Program) []int
	if o.streams == HalfBatches {
		pins = m.halfPins
	}
	exec, err := newExecutorPinned(m.g, retain, o, pins)
	if err != nil {
		return nil, err
	}
	m.exec = exec
	return m, nil
}

// opsInOrder is every op node of g in the order it was made, but those
// in unrun (the chains fused ops stand in for).
func opsInOrder(g *G.ExprGraph, unrun map[*G.Node]bool) []*G.Node {
	var out []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() != nil && g.From(n.ID()).Len() > 0 && !unrun[n] {
			out = append(out, n)
		}
	}
	return out
}

// checkShape validates a config, the parameters made for it and a batch
// shape (B, T <= block).
func checkShape(cfg Config, p *Params, B, T int) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	pc := p.Config()
	if pc.Vocab != cfg.Vocab || pc.Block != cfg.Block || pc.Layers != cfg.Layers || pc.Heads != cfg.Heads || pc.Embd != cfg.Embd {
		return fmt.Errorf("%w: params made for %+v, model for %+v", ErrConfig, pc, cfg)
	}
	if B <= 0 || T <= 0 || T > cfg.Block {
		return fmt.Errorf("%w: batch shape (B=%d, T=%d), want B > 0 and 0 < T <= block %d", ErrConfig, B, T, cfg.Block)
	}
	return nil
}

// Config is the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Params are the parameters the graph reads.
func (m *Model) Params() *Params { return m.params }

// Graph is the compiled expression graph (forward and, with train,
// backward), for analyses such as buffer lifetimes.
func (m *Model) Graph() *G.ExprGraph { return m.g }

// LossNode is the graph's mean cross-entropy, shape (1).
func (m *Model) LossNode() *G.Node { return m.loss }

// LogitsNode is the graph's (B*T, V) logits (nil for a halved step, whose
// two halves' logits Logits joins).
func (m *Model) LogitsNode() *G.Node { return m.logits }

// build makes the graph: the GPT forward of layers.go over (B, T) tokens,
// the loss, and for training the backward of every parameter, in one
// Backward over the whole model or, with a schedule, pass by pass.
func (m *Model) build(o modelOptions) error {
	sched := o.schedule
	N := m.B * m.T
	mp, err := newMixed(o.precision)
	if err != nil {
		return err
	}
	masks := &maskList{}
	hooks := []hook{masks}
	if hooks, err = o.int8Hooks(m.params, hooks, m.train); err != nil {
		return err
	}
	if mp != nil {
		hooks = append(hooks, mp)
		m.mp = mp
	}
	var stat *runningMean
	if o.stat != nil {
		stat = &runningMean{stat: o.stat, guard: o.statGuard}
		hooks = append(hooks, stat)
	}
	var log *passLog
	if sched != nil {
		log = &passLog{}
		hooks = append(hooks, log)
	}
	n := newBuilder(m.g, m.cfg, m.params, m.B, m.T, m.train, nil, hooks...)
	if m.rngOpts.Kind == Stateless {
		n.drop = &m.dropKey // the masks drawn in the kernels
	}
	m.idx, m.pos, m.tgt = make([]int, N), make([]int, N), make([]int, N)
	for i := range m.pos {
		m.pos[i] = i % m.T
	}
	var idx, pos, tgt *G.Node
	if o.streams != HalfBatches {
		idx = n.input("idx", m.idx, N)
		pos = n.input("pos", m.pos, N)
		tgt = n.input("targets", m.tgt, N)
	}
	if sched != nil {
		if !m.train {
			return fmt.Errorf("%w: a schedule of passes is for a training model", ErrConfig)
		}
		loss, logits, grads, passes, err := n.scheduled(*sched, log, idx, pos, tgt, n.input("dloss", []float32{1}, 1))
		if err != nil {
			return err
		}
		m.loss, m.logits, m.masks, m.passes, m.unrun = loss, logits, masks.all, passes, n.unrun
		if stat != nil {
			m.extra = stat.nodes
		}
		_, counts := n.paramNodes()
		return m.setGrads(n, grads, counts)
	}

	if o.streams == HalfBatches {
		m.loss = m.buildHalves(n)
	} else {
		x := n.embed(idx, pos) // (B*T, C)
		for l := range m.cfg.Layers {
			x = n.block(x, l) // (B*T, C)
		}
		m.logits = n.head(x)                                                              // (B*T, V)
		m.loss = n.do(func() (*G.Node, error) { return ops.CrossEntropy(m.logits, tgt) }) // (1)
	}
	m.masks = masks.all
	if n.err != nil {
		return n.err
	}
	if !m.train {
		return nil
	}
	dloss := n.input("dloss", []float32{1}, 1)
	all, counts := n.paramNodes()
	gs, err := BackwardReading(G.Nodes{m.loss}, G.Nodes{dloss}, all, n.reread, nil)
	if err != nil {
		return fmt.Errorf("gradients: %w", err)
	}
	var grads [][]*G.Node
	k := 0
	for _, c := range counts {
		grads = append(grads, gs[k:k+c])
		k += c
	}
	return m.setGrads(n, grads, counts)
}

// setGrads records each parameter's gradient nodes (and the parameter
// nodes they differentiate).
func (m *Model) setGrads(n *builder, grads [][]*G.Node, counts []int) error {
	m.wrt, _ = n.paramNodes()
	m.grads = make([]gradParts, len(counts))
	m.joined = make([][]float32, len(counts))
	for i := range counts {
		name := m.params.Names()[i]
		var nodes []*G.Node // each once: a schedule's recomputation reads a parameter's nodes again
		size := 0
		for _, g := range grads[i] {
			if g == nil {
				return fmt.Errorf("gradients: the loss does not depend on %s", name)
			}
			if !slices.Contains(nodes, g) {
				nodes = append(nodes, g)
				size += g.Shape().TotalSize()
			}
		}
		if want := len(m.params.Slice(name)); size != want {
			return fmt.Errorf("gradients: %d values of %s's gradient, want %d", size, name, want)
		}
		m.grads[i] = gradParts{nodes: nodes}
		if len(nodes) > 1 {
			m.joined[i] = make([]float32, len(m.params.Slice(name)))
		}
	}
	return nil
}

// SetDropoutSeed sets the seed of the dropout masks (default 0).
func (m *Model) SetDropoutSeed(seed int64) { m.dropKey.Seed = seed }

// SetDropoutKey sets the step counter of the next Step's dropout masks.
// Each Step uses the masks of (seed, step, layer, site) and then advances
// the step by one, so a run is reproducible from the seed alone.
func (m *Model) SetDropoutKey(step int64) { m.dropKey.Step = step }

// DropoutKey is the step counter the next Step will use.
func (m *Model) DropoutKey() int64 { return m.dropKey.Step }

// ErrTokens marks token ids outside the vocabulary or batches of the wrong
// size.
var ErrTokens = errors.New("bad token batch")

func (m *Model) load(dst []int, src []int32, what string) error {
	if len(src) != len(dst) {
		return fmt.Errorf("%w: %s has %d tokens, want B*T = %d*%d = %d", ErrTokens, what, len(src), m.B, m.T, len(dst))
	}
	for i, v := range src {
		if v < 0 || int(v) >= m.cfg.Vocab {
			return fmt.Errorf("%w: %s[%d] = %d outside the vocabulary [0, %d)", ErrTokens, what, i, v, m.cfg.Vocab)
		}
		dst[i] = int(v)
	}
	return nil
}

// Feed loads a batch into the graph's inputs and fills the stateful
// generator's dropout masks, without running anything: Step's first half,
// for an executor other than the model's own machine. (Stateless masks
// are drawn from the current key as the graph runs.) idx and targets hold B*T
// tokens each, row-major (B, T); targets may be nil for an evaluation
// model (they are then zeros).
func (m *Model) Feed(idx, targets []int32) error {
	if err := m.load(m.idx, idx, "idx"); err != nil {
		return err
	}
	if targets == nil && m.train {
		return fmt.Errorf("%w: a training step needs targets", ErrTokens)
	}
	if targets == nil {
		clear(m.tgt)
	} else if err := m.load(m.tgt, targets, "targets"); err != nil {
		return err
	}
	if m.rngOpts.Kind == Stateful {
		if m.rng == nil {
			m.rng = newStream(m.dropKey.Seed)
		}
		m.fillStateful()
	}
	return nil // stateless masks are drawn as the graph runs
}

// Step runs the graph on idx and targets (see Feed): the forward pass and,
// for a training model, the backward pass; then it advances the dropout
// key. It returns the mean cross-entropy, or 0 when targets is nil. Logits
// and Grad read the results until the next Step.
func (m *Model) Step(idx, targets []int32) (float32, error) {
	if err := m.Feed(idx, targets); err != nil {
		return 0, err
	}
	if err := m.exec.run(); err != nil {
		return 0, fmt.Errorf("GPT step: %w", err)
	}
	m.dropKey.Step++
	if targets == nil {
		return 0, nil
	}
	switch v := m.exec.value(m.loss).(type) {
	case *G.F32:
		return float32(*v), nil
	case *tensor.Dense:
		return v.Float32s()[0], nil
	}
	return 0, fmt.Errorf("GPT step: the loss has no float32 value")
}

// Logits are the (B, T, V) logits of the last Step, row-major. The slice
// belongs to the model and changes at the next Step.
func (m *Model) Logits() []float32 {
	if m.logits != nil {
		return m.f32Value(m.logits)
	}
	m.logitsBuf = append(append(m.logitsBuf[:0], m.f32Value(m.halfLogits[0])...), m.f32Value(m.halfLogits[1])...)
	return m.logitsBuf
}

// logitNodes are the nodes holding the logits: one, or a halved step's two.
func (m *Model) logitNodes() G.Nodes {
	if m.logits != nil {
		return G.Nodes{m.logits}
	}
	return G.Nodes{m.halfLogits[0], m.halfLogits[1]}
}

// f32Value is a node's float32 data after the last run, read without
// boxing the slice in an interface (Data() would allocate); nil before the
// node has run.
func (m *Model) f32Value(n *G.Node) []float32 { return f32Of(m.exec.value(n)) }

// f32Of is a float32 tensor's data, read without boxing the slice in an
// interface (Data() would allocate); nil for any other value.
func f32Of(v G.Value) []float32 {
	if d, ok := v.(*tensor.Dense); ok && d.Dtype() == tensor.Float32 {
		return d.Float32s()
	}
	return nil
}

// Grad is the gradient of the loss with respect to the named parameter
// after the last Step, in the parameter's layout; nil for an unknown name
// or an evaluation model. The slice belongs to the model and changes at
// the next Step.
func (m *Model) Grad(name string) []float32 {
	if !m.train {
		return nil
	}
	i, ok := m.params.index[name]
	if !ok {
		return nil
	}
	gp := m.grads[i]
	if len(gp.nodes) == 1 {
		return m.f32Value(gp.nodes[0])
	}
	// c_attn: join the q, k, v row blocks (read from the nodes at each
	// call, so an executor other than Step's machine is seen too).
	off := 0
	for _, n := range gp.nodes {
		off += copy(m.joined[i][off:], m.f32Value(n))
	}
	return m.joined[i]
}

// Close releases the executor's resources.
func (m *Model) Close() error { return m.exec.close() }
