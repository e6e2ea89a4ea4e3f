package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/qgemm"
	"gptlab/planner/arena"
)

// Int8Kernel is how Int8Linear multiplies (internal/qgemm's two kernels).
type Int8Kernel uint8

// The kernels.
const (
	// Int8WeightOnly dequantizes the weights a panel at a time into the
	// float32 GEMM: float32 arithmetic on Q·scale (qgemm.WeightOnly).
	Int8WeightOnly Int8Kernel = iota
	// Int8Dynamic quantizes each row of x at run time (one scale a row,
	// round half to even) and sums int8×int8 products in int32
	// (qgemm.Dynamic), as PyTorch's quantize_dynamic.
	Int8Dynamic
)

var int8KernelNames = [...]string{Int8WeightOnly: "weight-only", Int8Dynamic: "dynamic"}

// String names the kernel: "weight-only" or "dynamic".
func (k Int8Kernel) String() string {
	if k.Valid() {
		return int8KernelNames[k]
	}
	return fmt.Sprintf("Int8Kernel(%d)", uint8(k))
}

// Valid reports whether k is one of the kernels.
func (k Int8Kernel) Valid() bool { return int(k) < len(int8KernelNames) }

// Int8Weights is an int8 matrix packed for the kernels (qgemm.Weights).
type Int8Weights = qgemm.Weights

// Int8Linear is x·Wᵀ for x (N, K) float32 and an int8 weight W (Out, K)
// packed for the kernels (qgemm.NewWeights): (N, Out) float32, by kernel
// on packed. The graph's input w is packed's codes themselves
// (packed.Packed(), of shape packed.PackedShape(): the program holds
// the one copy the kernel reads, one byte a code), s its scales as
// stored (one per row, one, or one per row and block of 32 as packed's
// scheme says). It is forward-only.
func Int8Linear(x, w, s *G.Node, packed *Int8Weights, kernel Int8Kernel) (*G.Node, error) {
	if !kernel.Valid() {
		return nil, fmt.Errorf("int8 linear: kernel %v", kernel)
	}
	return G.ApplyOp(int8LinearOp{packed: packed, kernel: kernel}, x, w, s)
}

type int8LinearOp struct {
	opBase
	packed *Int8Weights
	kernel Int8Kernel
}

func (int8LinearOp) Arity() int { return 3 }
func (int8LinearOp) Type() hm.Type {
	return hm.NewFnType(tt(2, tensor.Float32), tt(2, tensor.Int8), tt(1, tensor.Float32), tt(2, tensor.Float32))
}

// check is the output shape of x (N, K), w (Out, K) and s: (N, Out).
func (op int8LinearOp) check(in []tensor.Shape) (tensor.Shape, error) {
	x, w, s := in[0], in[1], in[2]
	pw := op.packed
	switch {
	case x.Dims() != 2 || w.Dims() != 2 || s.Dims() != 1:
		return nil, fmt.Errorf("%v: shapes %v, %v, %v: want x (N, K), w packed, scales (S)", op, x, w, s)
	case !packedShape(w, pw) || x[1] != pw.K():
		return nil, fmt.Errorf("%v: x %v and w %v, packed weights %d×%d", op, x, w, pw.N(), pw.K())
	case s[0] != pw.Scheme().NumScales(pw.N(), pw.K()):
		return nil, fmt.Errorf("%v: %d scales, want %d", op, s[0], pw.Scheme().NumScales(pw.N(), pw.K()))
	}
	return tensor.Shape{x[0], pw.N()}, nil
}

func (op int8LinearOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check([]tensor.Shape{shapeOf(in[0]), shapeOf(in[1]), shapeOf(in[2])})
}

func (op int8LinearOp) Do(in ...G.Value) (G.Value, error) {
	s, err := op.check([]tensor.Shape{in[0].Shape(), in[1].Shape(), in[2].Shape()})
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float32)), in...)
}

func (op int8LinearOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runBufs(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op int8LinearOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op int8LinearOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", op, len(in))
	}
	if !in[0].Is(arena.F32) || !in[1].Is(arena.Int8) || !in[2].Is(arena.F32) || !out.Is(arena.F32) {
		return nil, fmt.Errorf("%v: buffers %v, %v, %v -> %v: want f32, int8, f32 -> f32", op, in[0].Dtype, in[1].Dtype, in[2].Dtype, out.Dtype)
	}
	s, err := op.check(shapesOfBufs(in))
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	x, y, m, w := in[0].F32, out.F32, s[0], op.packed
	if !samePacked(in[1].I8, w) {
		return nil, fmt.Errorf("%v: the int8 input is not the packed weights' codes", op)
	}
	if op.kernel == Int8Dynamic {
		return func() { qgemm.Dynamic(y, x, m, w) }, nil
	}
	return func() { qgemm.WeightOnly(y, x, m, w) }, nil
}

func (op int8LinearOp) String() string {
	return fmt.Sprintf("Int8Linear{%s,%s,%d×%d}", op.kernel, op.packed.Scheme(), op.packed.N(), op.packed.K())
}
func (op int8LinearOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%s@%p", op, op.packed) }
func (op int8LinearOp) Hashcode() uint32      { return hashOf(op) }
func (int8LinearOp) DiffWRT(int) []bool       { return []bool{false, false, false} }
func (op int8LinearOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%v is not differentiable (an int8 model is for inference)", op)
}

// Int8Gather is the rows idx (N, ints in [0, V)) of an int8 embedding
// table W (V, C) packed for the kernels, dequantized: (N, C) float32,
// out[i, c] = W[idx[i], c]·scale of (idx[i], c). As for Int8Linear, the
// input w is packed's codes and s its scales; the table is the tied
// head's, which Int8Linear multiplies by from the same memory. An index
// outside [0, V) panics in the kernel, as arena.Gather's (the models
// check tokens first). It is forward-only.
func Int8Gather(w, s, idx *G.Node, packed *Int8Weights) (*G.Node, error) {
	return G.ApplyOp(int8GatherOp{packed: packed}, w, s, idx)
}

type int8GatherOp struct {
	opBase
	packed *Int8Weights
}

func (int8GatherOp) Arity() int { return 3 }
func (int8GatherOp) Type() hm.Type {
	return hm.NewFnType(tt(2, tensor.Int8), tt(1, tensor.Float32), tt(1, tensor.Int), tt(2, tensor.Float32))
}

func (op int8GatherOp) check(in []tensor.Shape) (tensor.Shape, error) {
	w, s, idx := in[0], in[1], in[2]
	pw := op.packed
	if w.Dims() != 2 || !packedShape(w, pw) || s.Dims() != 1 || idx.Dims() != 1 || s[0] != pw.Scheme().NumScales(pw.N(), pw.K()) {
		return nil, fmt.Errorf("%v: shapes %v, %v, %v: want w packed, its %d scales, idx (N)", op, w, s, idx, pw.Scheme().NumScales(pw.N(), pw.K()))
	}
	return tensor.Shape{idx[0], pw.K()}, nil
}

func (op int8GatherOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check([]tensor.Shape{shapeOf(in[0]), shapeOf(in[1]), shapeOf(in[2])})
}

func (op int8GatherOp) Do(in ...G.Value) (G.Value, error) {
	s, err := op.check([]tensor.Shape{in[0].Shape(), in[1].Shape(), in[2].Shape()})
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float32)), in...)
}

func (op int8GatherOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runBufs(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op int8GatherOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op int8GatherOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%v: %d inputs, want 3", op, len(in))
	}
	if !in[0].Is(arena.Int8) || !in[1].Is(arena.F32) || !in[2].Is(arena.Int) || !out.Is(arena.F32) {
		return nil, fmt.Errorf("%v: buffers %v, %v, %v -> %v: want int8, f32, int -> f32", op, in[0].Dtype, in[1].Dtype, in[2].Dtype, out.Dtype)
	}
	s, err := op.check(shapesOfBufs(in))
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	pw, idx, y := op.packed, in[2].Int, out.F32
	if !samePacked(in[0].I8, pw) {
		return nil, fmt.Errorf("%v: the int8 input is not the packed weights' codes", op)
	}
	V, C := pw.N(), pw.K()
	return func() {
		for i, r := range idx {
			if r < 0 || r >= V {
				panic(fmt.Sprintf("ops: Int8Gather: index %d out of range [0, %d)", r, V))
			}
			pw.DequantizeRow(y[i*C:(i+1)*C], r)
		}
	}, nil
}

// packedShape reports whether w is the shape of pw's packed codes.
func packedShape(w tensor.Shape, pw *Int8Weights) bool {
	r, c := pw.PackedShape()
	return w.Dims() == 2 && w[0] == r && w[1] == c
}

// samePacked reports whether q is pw's packed codes themselves (the
// program's input bound to the memory the kernel reads, not a copy).
func samePacked(q []int8, pw *Int8Weights) bool {
	p := pw.Packed()
	return len(q) == len(p) && len(q) > 0 && &q[0] == &p[0]
}

func (op int8GatherOp) String() string {
	return fmt.Sprintf("Int8Gather{%s,%d×%d}", op.packed.Scheme(), op.packed.N(), op.packed.K())
}
func (op int8GatherOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "%s@%p", op, op.packed) }
func (op int8GatherOp) Hashcode() uint32      { return hashOf(op) }
func (int8GatherOp) DiffWRT(int) []bool       { return []bool{false, false, false} }
func (op int8GatherOp) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("%v is not differentiable (an int8 model is for inference)", op)
}

// runBufs binds op's kernel to the storage of out and in, whatever their
// types, and runs it once: the UsePreallocDo of the int8 ops.
func runBufs(op binder, name string, out G.Value, in []G.Value) (G.Value, error) {
	o, ok := arena.BufOf(out, 0)
	if !ok {
		return nil, fmt.Errorf("%s: output %T is not dense storage", name, out)
	}
	bufs := make([]arena.Buf, len(in))
	for i, v := range in {
		if bufs[i], ok = arena.BufOf(v, 0); !ok {
			return nil, fmt.Errorf("%s: input %d (%T) is not dense storage", name, i, v)
		}
	}
	run, err := op.bind(o, bufs)
	if err != nil {
		return nil, err
	}
	run()
	return out, nil
}
