package arena

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GatherOp reads rows of a table by index: y[i, :] = table[idx[i], :],
// table (R, C), idx an Int vector (N), y (N, C): an embedding lookup. Its
// gradient is ScatterAddOp. An index outside [0, R) panics in the kernel
// (the caller checks its tokens; a panic inside a lab becomes an error).
type GatherOp struct{ opBase }

// Gather is the node table[idx] (rows).
func Gather(table, idx *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(GatherOp{}, table, idx)
}

// Name is the op's kind.
func (GatherOp) Name() string   { return "Gather" }
func (GatherOp) String() string { return "Gather" }
func (GatherOp) Arity() int     { return 2 }
func (GatherOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(2, a), tensorType(1, tensor.Int), tensorType(2, a))
}

func (op GatherOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	t, idx := in[0], in[1]
	if t.Dims() != 2 || idx.Dims() != 1 {
		return nil, fmt.Errorf("%v: table %v and indices %v, want (R, C) and (N)", op, t, idx)
	}
	return tensor.Shape{idx[0], t[1]}, nil
}

func (op GatherOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.outShape(shapesOf(in))
}

func (op GatherOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return runFloat(op, nil, in, 1) }

func (op GatherOp) UsePreallocDo(out gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return runFloat(op, out, in, 1)
}

// BindKernel implements Kernel.
func (op GatherOp) BindKernel(out Buf, in []Buf) (func(), bool) { return bindKernel(op, out, in) }

func (op GatherOp) bind(out Buf, in []Buf) (func(), error) {
	s, err := checkShaped(op, out, in, out.Dtype, out.Dtype, Int)
	if err != nil {
		return nil, err
	}
	rows, c, idx := in[0].Shape[0], s[1], in[1].Int
	switch out.Dtype {
	case F32:
		return func() { gather(out.F32, in[0].F32, idx, rows, c) }, nil
	case F64:
		return func() { gather(out.F64, in[0].F64, idx, rows, c) }, nil
	}
	return nil, fmt.Errorf("%v: dtype %v, want f32 or f64", op, out.Dtype)
}

func gather[F float32 | float64](y, x []F, idx []int, rows, c int) {
	for i, r := range idx {
		if r < 0 || r >= rows {
			panic(fmt.Sprintf("arena: Gather: index %d out of range [0, %d)", r, rows))
		}
		copy(y[i*c:(i+1)*c], x[r*c:(r+1)*c])
	}
}

func (GatherOp) WriteHash(h hash.Hash) { writeHash(h, "Gather") }
func (GatherOp) Hashcode() uint32      { return hashString("Gather") }
func (GatherOp) DiffWRT(int) []bool    { return []bool{true, false} }

// SymDiff: the table's gradient is the rows' gradients added back at
// their indices.
func (op GatherOp) SymDiff(in gorgonia.Nodes, out, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	d, err := ScatterAdd(grad, in[1], in[0].Shape()[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{d, nil}, nil
}

// ScatterAddOp is Gather's gradient: y (R, C) is zero but for
// y[idx[i], :] += g[i, :], added in the order of i, with g (N, C).
type ScatterAddOp struct {
	opBase
	Rows int
}

// ScatterAdd is the node that adds the rows of g into rows rows at idx.
func ScatterAdd(g, idx *gorgonia.Node, rows int) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(ScatterAddOp{Rows: rows}, g, idx)
}

// Name is the op's kind.
func (ScatterAddOp) Name() string      { return "ScatterAdd" }
func (op ScatterAddOp) String() string { return fmt.Sprintf("ScatterAdd{%d}", op.Rows) }
func (ScatterAddOp) Arity() int        { return 2 }
func (ScatterAddOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(2, a), tensorType(1, tensor.Int), tensorType(2, a))
}

func (op ScatterAddOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	g, idx := in[0], in[1]
	if g.Dims() != 2 || idx.Dims() != 1 || idx[0] != g[0] || op.Rows < 1 {
		return nil, fmt.Errorf("%v: gradient %v and indices %v, want (N, C) and (N)", op, g, idx)
	}
	return tensor.Shape{op.Rows, g[1]}, nil
}

func (op ScatterAddOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.outShape(shapesOf(in))
}

func (op ScatterAddOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return runFloat(op, nil, in, 1)
}

func (op ScatterAddOp) UsePreallocDo(out gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return runFloat(op, out, in, 1)
}

// BindKernel implements Kernel.
func (op ScatterAddOp) BindKernel(out Buf, in []Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op ScatterAddOp) bind(out Buf, in []Buf) (func(), error) {
	s, err := checkShaped(op, out, in, out.Dtype, out.Dtype, Int)
	if err != nil {
		return nil, err
	}
	c, idx := s[1], in[1].Int
	switch out.Dtype {
	case F32:
		return func() { scatterAdd(out.F32, in[0].F32, idx, op.Rows, c) }, nil
	case F64:
		return func() { scatterAdd(out.F64, in[0].F64, idx, op.Rows, c) }, nil
	}
	return nil, fmt.Errorf("%v: dtype %v, want f32 or f64", op, out.Dtype)
}

func scatterAdd[F float32 | float64](y, g []F, idx []int, rows, c int) {
	clear(y)
	for i, r := range idx {
		if r < 0 || r >= rows {
			panic(fmt.Sprintf("arena: ScatterAdd: index %d out of range [0, %d)", r, rows))
		}
		dst, src := y[r*c:(r+1)*c], g[i*c:(i+1)*c]
		for j := range dst {
			dst[j] += src[j]
		}
	}
}

func (op ScatterAddOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op ScatterAddOp) Hashcode() uint32      { return hashString(op.String()) }
