package models

import (
	"context"
	"errors"
	"fmt"
	"math"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia panics at start on Go 1.26 without it
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
)

// Model is the GPT's graph compiled for one batch shape (B, T), run by a
// gorgonia TapeMachine. Its parameter nodes are bound to views of a
// Params, so an optimizer that updates the Params in place is seen by the
// next Step. With train, the graph holds the backward pass (built by
// gorgonia.Grad) and, when the config's dropout is positive, one mask input
// per dropout site.
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
	grads        []gradParts // per parameter, in Names order
	wrt          G.Nodes     // the parameter nodes differentiated, in GradNodes order
	joined       [][]float32 // gradient buffers of split parameters

	masks    []maskInput
	dropSeed int64
	dropStep int64
}

// gradParts are the graph gradients of one parameter: one node, or the
// three row blocks of c_attn in order.
type gradParts struct {
	nodes []*G.Node
}

// maskInput is one dropout mask fed to the graph.
type maskInput struct {
	node        *G.Node
	data        []float32
	layer, site int
}

// NewModel compiles the graph for batches of B sequences of length T
// (1 <= T <= cfg.Block) on the parameters p, which must have been made
// for cfg's shape. With train it also builds every parameter's gradient.
//
// By default the graph runs from one planned arena (package
// planner/arena); WithTapeMachine selects gorgonia's TapeMachine, which
// the tests keep as the reference.
func NewModel(cfg Config, p *Params, B, T int, train bool, opts ...ModelOption) (*Model, error) {
	o := modelOptions{arena: arena.Options{InPlace: true}}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc := p.Config()
	if pc.Vocab != cfg.Vocab || pc.Block != cfg.Block || pc.Layers != cfg.Layers || pc.Heads != cfg.Heads || pc.Embd != cfg.Embd {
		return nil, fmt.Errorf("%w: params made for %+v, model for %+v", ErrConfig, pc, cfg)
	}
	if B <= 0 || T <= 0 || T > cfg.Block {
		return nil, fmt.Errorf("%w: batch shape (B=%d, T=%d), want B > 0 and 0 < T <= block %d", ErrConfig, B, T, cfg.Block)
	}
	m := &Model{cfg: cfg, params: p, B: B, T: T, train: train, g: G.NewGraph()}
	if err := m.build(); err != nil {
		return nil, fmt.Errorf("build GPT graph: %w", err)
	}
	if o.tape {
		m.exec = &tapeExec{vm: G.NewTapeMachine(m.g)}
		return m, nil
	}
	if o.arena.Algorithm.Place == nil {
		o.arena.Algorithm = defaultPlanner()
	}
	retain := append(G.Nodes{m.loss, m.logits}, m.GradNodes()...)
	prog, err := arena.Compile(context.Background(), m.g, retain, o.arena)
	if err != nil {
		return nil, fmt.Errorf("plan the GPT's arena: %w", err)
	}
	m.exec = &arenaExec{p: prog}
	return m, nil
}

// Config is the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Params are the parameters the graph reads.
func (m *Model) Params() *Params { return m.params }

// Graph is the compiled expression graph (forward and, with train,
// backward), for analyses such as buffer lifetimes.
func (m *Model) Graph() *G.ExprGraph { return m.g }

// LossNode is the graph's scalar mean cross-entropy.
func (m *Model) LossNode() *G.Node { return m.loss }

// LogitsNode is the graph's (B*T, V) logits.
func (m *Model) LogitsNode() *G.Node { return m.logits }

// gb is a graph builder that keeps the first error, so the model reads
// top to bottom without an error check per line.
type gb struct {
	g   *G.ExprGraph
	err error
}

func (b *gb) do(f func() (*G.Node, error)) *G.Node {
	if b.err != nil {
		return nil
	}
	n, err := f()
	if err != nil {
		b.err = err
	}
	return n
}

func (m *Model) intInput(name string, backing []int) *G.Node {
	t := tensor.New(tensor.WithShape(len(backing)), tensor.WithBacking(backing))
	return G.NewVector(m.g, tensor.Int, G.WithShape(len(backing)), G.WithName(name), G.WithValue(t))
}

// weight adds a node bound to data viewed as shape.
func (m *Model) weight(name string, data []float32, shape ...int) *G.Node {
	t := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	if len(shape) == 1 {
		return G.NewVector(m.g, tensor.Float32, G.WithShape(shape...), G.WithName(name), G.WithValue(t))
	}
	return G.NewMatrix(m.g, tensor.Float32, G.WithShape(shape...), G.WithName(name), G.WithValue(t))
}

func (m *Model) build() error {
	cfg, p := m.cfg, m.params
	B, T, C, H := m.B, m.T, m.cfg.Embd, m.cfg.Heads
	hs := C / H
	N := B * T
	b := &gb{g: m.g}
	wrt := map[string][]*G.Node{}
	param := func(name string) *G.Node {
		n := m.weight(name, p.Slice(name), p.Shape(name)...)
		wrt[name] = []*G.Node{n}
		return n
	}

	m.idx, m.pos, m.tgt = make([]int, N), make([]int, N), make([]int, N)
	for i := range m.pos {
		m.pos[i] = i % T
	}
	idx := m.intInput("idx", m.idx)
	pos := m.intInput("pos", m.pos)
	tgt := m.intInput("targets", m.tgt)

	wte := param("transformer.wte.weight")
	wpe := param("transformer.wpe.weight")
	tok := b.do(func() (*G.Node, error) { return G.ByIndices(wte, idx, 0) }) // (B*T, C)
	ps := b.do(func() (*G.Node, error) { return G.ByIndices(wpe, pos, 0) })  // (B*T, C)
	x := b.do(func() (*G.Node, error) { return G.Add(tok, ps) })             // (B*T, C)
	x = m.dropout(b, x, 0, SiteEmbed)

	// linear is y = x Wᵀ + b with W [out, in]: BatchedMatMul on 2-D
	// operands with transB reads W in place (no transposed copy).
	linear := func(x, w, bias *G.Node) *G.Node {
		y := b.do(func() (*G.Node, error) { return G.BatchedMatMul(x, w, false, true) })
		return b.do(func() (*G.Node, error) { return AddBias(y, bias) })
	}
	toHeads := func(t *G.Node) *G.Node { // (B*T, C) -> (B*H, T, hs)
		return b.do(func() (*G.Node, error) { return SplitHeads(t, B, T, H) })
	}
	fromHeads := func(t *G.Node) *G.Node { // (B*H, T, hs) -> (B*T, C)
		return b.do(func() (*G.Node, error) { return MergeHeads(t, B, T, H) })
	}
	scale := 1 / math.Sqrt(float64(hs))

	for l := 0; l < cfg.Layers; l++ {
		pre := fmt.Sprintf("transformer.h.%d.", l)
		h := b.do(func() (*G.Node, error) {
			return LayerNorm(x, param(pre+"ln_1.weight"), param(pre+"ln_1.bias"))
		}) // (B*T, C)

		// q, k, v from the row blocks of c_attn: [3C, C] = [Wq; Wk; Wv].
		wName, bName := pre+"attn.c_attn.weight", pre+"attn.c_attn.bias"
		wAll, bAll := p.Slice(wName), p.Slice(bName)
		var qkv [3]*G.Node
		for k, part := range []string{"q", "k", "v"} {
			w := m.weight(wName+"."+part, wAll[k*C*C:(k+1)*C*C], C, C)
			bias := m.weight(bName+"."+part, bAll[k*C:(k+1)*C], C)
			wrt[wName] = append(wrt[wName], w)
			wrt[bName] = append(wrt[bName], bias)
			qkv[k] = toHeads(linear(h, w, bias)) // (B*H, T, hs)
		}
		att := b.do(func() (*G.Node, error) { return G.BatchedMatMul(qkv[0], qkv[1], false, true) }) // (B*H, T, T)
		att = b.do(func() (*G.Node, error) { return CausalSoftmax(att, scale) })
		att = m.dropout(b, att, l, SiteAttn)
		y := b.do(func() (*G.Node, error) { return G.BatchedMatMul(att, qkv[2]) }) // (B*H, T, hs)
		y = linear(fromHeads(y), param(pre+"attn.c_proj.weight"), param(pre+"attn.c_proj.bias"))
		y = m.dropout(b, y, l, SiteAttnResid)
		x = b.do(func() (*G.Node, error) { return G.Add(x, y) }) // (B*T, C)

		h = b.do(func() (*G.Node, error) {
			return LayerNorm(x, param(pre+"ln_2.weight"), param(pre+"ln_2.bias"))
		})
		f := linear(h, param(pre+"mlp.c_fc.weight"), param(pre+"mlp.c_fc.bias")) // (B*T, 4C)
		f = b.do(func() (*G.Node, error) { return GELU(f) })
		f = linear(f, param(pre+"mlp.c_proj.weight"), param(pre+"mlp.c_proj.bias")) // (B*T, C)
		f = m.dropout(b, f, l, SiteMLP)
		x = b.do(func() (*G.Node, error) { return G.Add(x, f) })
	}
	x = b.do(func() (*G.Node, error) {
		return LayerNorm(x, param("transformer.ln_f.weight"), param("transformer.ln_f.bias"))
	})
	m.logits = b.do(func() (*G.Node, error) { return G.BatchedMatMul(x, wte, false, true) }) // (B*T, V), head tied to wte
	m.loss = b.do(func() (*G.Node, error) { return CrossEntropy(m.logits, tgt) })
	if b.err != nil {
		return b.err
	}
	if !m.train {
		return nil
	}

	var all G.Nodes
	for _, name := range p.Names() {
		all = append(all, wrt[name]...)
	}
	m.wrt = all
	gs, err := G.Grad(m.loss, all...)
	if err != nil {
		return fmt.Errorf("gradients: %w", err)
	}
	m.grads = make([]gradParts, len(p.Names()))
	m.joined = make([][]float32, len(p.Names()))
	k := 0
	for i, name := range p.Names() {
		n := len(wrt[name])
		m.grads[i] = gradParts{nodes: gs[k : k+n]}
		if n > 1 {
			m.joined[i] = make([]float32, len(p.Slice(name)))
		}
		k += n
	}
	return nil
}

// dropout multiplies x by a mask input for (layer, site) when training
// with a positive dropout; otherwise it returns x itself (no node at all).
func (m *Model) dropout(b *gb, x *G.Node, layer, site int) *G.Node {
	if !m.train || m.cfg.Dropout == 0 || b.err != nil {
		return x
	}
	s := x.Shape()
	data := make([]float32, s.TotalSize())
	t := tensor.New(tensor.WithShape(s.Clone()...), tensor.WithBacking(data))
	mask := G.NewTensor(m.g, tensor.Float32, s.Dims(), G.WithShape(s.Clone()...),
		G.WithName(fmt.Sprintf("dropout.%d.%d", layer, site)), G.WithValue(t))
	m.masks = append(m.masks, maskInput{node: mask, data: data, layer: layer, site: site})
	return b.do(func() (*G.Node, error) { return G.HadamardProd(x, mask) })
}

// SetDropoutSeed sets the seed of the dropout masks (default 0).
func (m *Model) SetDropoutSeed(seed int64) { m.dropSeed = seed }

// SetDropoutKey sets the step counter of the next Step's dropout masks.
// Each Step uses the masks of (seed, step, layer, site) and then advances
// the step by one, so a run is reproducible from the seed alone.
func (m *Model) SetDropoutKey(step int64) { m.dropStep = step }

// DropoutKey is the step counter the next Step will use.
func (m *Model) DropoutKey() int64 { return m.dropStep }

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

// Feed loads a batch into the graph's inputs and fills the dropout masks
// of the current key, without running anything: Step's first half, for an
// executor other than the model's own machine. idx and targets hold B*T
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
	for _, mk := range m.masks {
		DropoutMask(mk.data, m.cfg.Dropout, m.dropSeed, m.dropStep, mk.layer, mk.site)
	}
	return nil
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
	m.dropStep++
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
func (m *Model) Logits() []float32 { return m.f32Value(m.logits) }

// f32Value is a node's float32 data after the last run, read without
// boxing the slice in an interface (Data() would allocate); nil before the
// node has run.
func (m *Model) f32Value(n *G.Node) []float32 {
	if d, ok := m.exec.value(n).(*tensor.Dense); ok {
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
