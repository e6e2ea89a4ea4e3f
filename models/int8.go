package models

// int8.go: an int8 model's graph as a pass over the builder (the hook
// int8Pass): the quantized matrices enter the graph as int8 inputs (one
// byte an element, as the arena's program holds them) with their scales
// beside them, and each linear layer's product x·Wᵀ reading one becomes
// an ops.Int8Linear; with the head quantized, the embedding lookup reads
// the int8 table (ops.Int8Gather). Everything else is the float32 graph.

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/models/ops"
	"gptlab/planner/arena"
)

// Int8Kernel is how an int8 linear layer multiplies (ops.Int8Kernel): the
// weight-only kernel (codes dequantized per tile into the float32 GEMM:
// float32 arithmetic on the weights Q·scale) or the dynamic one
// (activations quantized per row at run time, int8×int8 products summed
// in int32, as PyTorch's quantize_dynamic).
type Int8Kernel = ops.Int8Kernel

// The kernels.
const (
	Int8WeightOnly = ops.Int8WeightOnly
	Int8Dynamic    = ops.Int8Dynamic
)

// int8Option is what WithInt8 sets.
type int8Option struct {
	q      *Quantized
	kernel Int8Kernel
}

// WithInt8 builds the graph of the int8 model q (NewModel, NewDecoder,
// NewSampler on q.Params()): its quantized matrices are int8 inputs of
// the graph, multiplied by kernel. The model is for inference: a training
// model, or any precision policy but f32, is refused.
func WithInt8(q *Quantized, kernel Int8Kernel) ModelOption {
	return func(o *modelOptions) { o.int8 = &int8Option{q: q, kernel: kernel} }
}

// int8Hooks appends the int8 pass to hooks when the options hold one; p
// must then be its model's float32 part, and p may lack a parameter only
// then.
func (o modelOptions) int8Hooks(p *Params, hooks []hook, train bool) ([]hook, error) {
	if o.int8 == nil {
		if n := len(p.Names()); n != len(paramLayoutNames(p.Config())) {
			return nil, fmt.Errorf("%w: the parameters hold %d of the model's %d tensors (an int8 model's float32 part: build it WithInt8)", ErrConfig, n, len(paramLayoutNames(p.Config())))
		}
		return hooks, nil
	}
	q := o.int8.q
	switch {
	case train:
		return nil, fmt.Errorf("%w: an int8 model is for inference (no training graph)", ErrConfig)
	case o.precision.Mixed():
		return nil, fmt.Errorf("%w: an int8 model under precision %s (int8 weights, float32 activations)", ErrConfig, o.precision.Name)
	case p != q.params:
		return nil, fmt.Errorf("%w: WithInt8 on parameters other than the int8 model's float32 part (Quantized.Params)", ErrConfig)
	case !o.int8.kernel.Valid():
		return nil, fmt.Errorf("%w: int8 kernel %v", ErrConfig, o.int8.kernel)
	}
	if err := q.checkComplete(); err != nil {
		return nil, err
	}
	return append(hooks, &int8Pass{q: q, kernel: o.int8.kernel, nodes: map[*G.Node]*int8Node{}}), nil
}

// paramLayoutNames are the names of cfg's parameters.
func paramLayoutNames(cfg Config) []string {
	names, _ := paramLayout(cfg)
	return names
}

// int8Pass is the hook of WithInt8 for one graph.
type int8Pass struct {
	noHook
	q      *Quantized
	kernel Int8Kernel
	nodes  map[*G.Node]*int8Node // an int8 weight input -> its tensor and scales
}

// int8Node is one int8 matrix in the graph: its codes' input node, its
// scales' and the tensor (a row range of c_attn's for q, k, v).
type int8Node struct {
	t      *Int8Tensor
	scales *G.Node
}

// paramNode makes the int8 input of rows [lo, hi) of a quantized matrix
// (all of it for hi 0) and its scales' input.
func (ip *int8Pass) paramNode(g *G.ExprGraph, name string, lo, hi int) *G.Node {
	t := ip.q.rows(name, lo, hi)
	if t == nil {
		return nil
	}
	// The input is the packed codes the kernels read, the tensor's one
	// copy: (rows padded to 16, depth padded).
	r, c := t.Packed().PackedShape()
	q := tensor.New(tensor.WithShape(r, c), tensor.WithBacking(t.Packed().Packed()))
	w := G.NewTensor(g, tensor.Int8, 2, G.WithShape(r, c), G.WithName(t.Name), G.WithValue(q))
	sv := tensor.New(tensor.WithShape(len(t.Scales)), tensor.WithBacking(t.Scales))
	s := G.NewTensor(g, tensor.Float32, 1, G.WithShape(len(t.Scales)), G.WithName(t.Name+".scales"), G.WithValue(sv))
	ip.nodes[w] = &int8Node{t: t, scales: s}
	return w
}

// matmul is x·wᵀ for an int8 weight w: ops.Int8Linear.
func (ip *int8Pass) matmul(x, w *G.Node) (*G.Node, error) {
	e, ok := ip.nodes[w]
	if !ok {
		return nil, nil
	}
	return ops.Int8Linear(x, w, e.scales, e.t.Packed(), ip.kernel) // (N, out)
}

// gather is the rows idx of an int8 embedding table: ops.Int8Gather.
func (ip *int8Pass) gather(w, idx *G.Node) (*G.Node, error) {
	e, ok := ip.nodes[w]
	if !ok {
		return nil, nil
	}
	return ops.Int8Gather(w, e.scales, idx, e.t.Packed()) // (N, C)
}

// InputBytes are the bytes of the graph's inputs (parameters, an int8
// model's codes and scales, the token ids) by element type, as the
// arena's program holds them: an int8 code takes one byte. Nil on the
// TapeMachine.
func (m *Model) InputBytes() map[arena.Dtype]int64 { return inputBytes(m.Arena(), m.g) }

// inputBytes sums the storage of g's inputs in p by type.
func inputBytes(p *arena.Program, g *G.ExprGraph) map[arena.Dtype]int64 {
	if p == nil {
		return nil
	}
	out := map[arena.Dtype]int64{}
	for _, n := range g.AllNodes() {
		if n.Op() != nil {
			continue
		}
		if b, ok := p.Buf(n); ok {
			out[b.Dtype] += int64(len(b.Bytes()))
		}
	}
	return out
}
