package arena

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
)

// ElemOp is an elementwise product or sum of two tensors of one shape:
// z = x + y (a residual, a gradient accumulation) or z = x ⊙ y (a dropout
// mask). It may write over either input (InPlacer): z[i] depends on x[i]
// and y[i] alone.
type ElemOp struct {
	opBase
	Product bool // ⊙ instead of +
	// Mask marks y as a constant mask (dropout's): x ⊙ y differentiated
	// with respect to x alone, its gradient g ⊙ y.
	Mask bool
}

// Add is the node x + y (same shapes).
func Add(x, y *gorgonia.Node) (*gorgonia.Node, error) { return gorgonia.ApplyOp(ElemOp{}, x, y) }

// Hadamard is the node x ⊙ y (same shapes).
func Hadamard(x, y *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(ElemOp{Product: true}, x, y)
}

// Masked is the node x ⊙ mask, differentiable in x only.
func Masked(x, mask *gorgonia.Node) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(ElemOp{Product: true, Mask: true}, x, mask)
}

// Name is the op's kind.
func (op ElemOp) Name() string {
	if op.Product {
		return "Mul"
	}
	return "Add"
}

func (op ElemOp) String() string {
	switch {
	case op.Mask:
		return "x⊙mask"
	case op.Product:
		return "x⊙y"
	}
	return "x+y"
}

func (ElemOp) Arity() int { return 2 }
func (ElemOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}

func (op ElemOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("%v: shapes %v and %v differ", op, in[0], in[1])
	}
	return in[0].Clone(), nil
}

func (op ElemOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.outShape(shapesOf(in))
}

func (op ElemOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return runFloat(op, nil, in, 2) }

func (op ElemOp) UsePreallocDo(out gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return runFloat(op, out, in, 2)
}

// BindKernel implements Kernel.
func (op ElemOp) BindKernel(out Buf, in []Buf) (func(), bool) { return bindKernel(op, out, in) }

// InPlaceInputs implements InPlacer.
func (ElemOp) InPlaceInputs() []int { return []int{0, 1} }

// elemGrain is the elements of one row of an elementwise kernel's split.
const elemGrain = 4096

func (op ElemOp) bind(out Buf, in []Buf) (func(), error) {
	if _, err := checkShaped(op, out, in, out.Dtype, out.Dtype, out.Dtype); err != nil {
		return nil, err
	}
	switch out.Dtype {
	case F64:
		a, b, c := in[0].F64, in[1].F64, out.F64
		return func() { elem(c, a, b, op.Product) }, nil
	case F32:
	default:
		return nil, fmt.Errorf("%v: dtype %v, want f32 or f64", op, out.Dtype)
	}
	a, b, c := in[0].F32, in[1].F32, out.F32
	f := vec.Add
	if op.Product {
		f = func(c, a, b []float32) { elem(c, a, b, true) }
	}
	n := len(c)
	return par.New((n+elemGrain-1)/elemGrain, 3*elemGrain, func(lo, hi int) {
		lo, hi = lo*elemGrain, min(hi*elemGrain, n)
		f(c[lo:hi], a[lo:hi], b[lo:hi])
	}).Run, nil
}

// elem is c = a + b or a ⊙ b, element by element (c may be a or b).
func elem[F float32 | float64](c, a, b []F, product bool) {
	b, c = b[:len(a)], c[:len(a)]
	if product {
		for i, x := range a {
			c[i] = x * b[i]
		}
		return
	}
	for i, x := range a {
		c[i] = x + b[i]
	}
}

func (op ElemOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op ElemOp) Hashcode() uint32      { return hashString(op.String()) }

func (op ElemOp) DiffWRT(int) []bool { return []bool{true, !op.Mask} }

// SymDiff: d(x+y) passes the gradient to both; d(x⊙y) is (g⊙y, g⊙x);
// d(x⊙mask) is g⊙mask.
func (op ElemOp) SymDiff(in gorgonia.Nodes, out, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	switch {
	case op.Mask:
		dx, err := Masked(grad, in[1])
		return gorgonia.Nodes{dx, nil}, err
	case !op.Product:
		return gorgonia.Nodes{grad, grad}, nil
	}
	dx, err := Hadamard(grad, in[1])
	if err != nil {
		return nil, err
	}
	dy, err := Hadamard(grad, in[0])
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{dx, dy}, nil
}
