package models

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// GELU is the exact GELU, x*Φ(x) = 0.5*x*(1+erf(x/√2)), as torch's
// F.gelu with approximate="none"; elementwise, any shape. Its gradient is
// GELUGrad(x, y, dy) = dy*(Φ(x) + x*φ(x)), which reads Φ(x) = y/x off the
// forward output y instead of evaluating erfc again.
func GELU(x *G.Node) (*G.Node, error) { return G.ApplyOp(geluOp{}, x) }

type geluOp struct {
	opBase
	grad bool // the backward op: (x, y, dy) -> dx
}

func (op geluOp) Arity() int {
	if op.grad {
		return 3
	}
	return 1
}
func (op geluOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(a, a, a, a)
	}
	return hm.NewFnType(a, a)
}
func (op geluOp) check(in []tensor.Shape) (tensor.Shape, error) {
	for _, s := range in[1:] {
		if !s.Eq(in[0]) {
			return nil, fmt.Errorf("%v: shapes %v and %v differ", op, in[0], s)
		}
	}
	return in[0].Clone(), nil
}
func (op geluOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}
func (op geluOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (op geluOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	if _, err := op.check(valueShapes(in)); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	switch y := o.Data().(type) {
	case []float32:
		x := in[0].Data().([]float32)
		if op.grad {
			fy, dy := in[1].Data().([]float32), in[2].Data().([]float32)
			parallelRows(len(x), 1, func(lo, hi int) { geluBackward(y[lo:hi], x[lo:hi], fy[lo:hi], dy[lo:hi], expFast) })
		} else {
			parallelRows(len(x), 1, func(lo, hi int) { geluForward32(y[lo:hi], x[lo:hi]) })
		}
	case []float64:
		if op.grad {
			geluBackward(y, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64), math.Exp)
		} else {
			geluForward(y, in[0].Data().([]float64))
		}
	}
	return o, nil
}
func (op geluOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op geluOp) Hashcode() uint32      { return hashOf(op) }
func (op geluOp) String() string {
	if op.grad {
		return "GELUGrad"
	}
	return "GELU"
}
func (op geluOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	r[0] = !op.grad
	return r
}
func (op geluOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("GELUGrad is not differentiable")
	}
	dx, err := G.ApplyOp(geluOp{grad: true}, in[0], out, grad)
	return G.Nodes{dx}, err
}

// geluForward is the float64 reference kernel (math.Erf); geluForward32
// is the float32 one.
func geluForward[F float](y, x []F) {
	for i, v := range x {
		f := float64(v)
		y[i] = F(0.5 * f * (1 + math.Erf(f/math.Sqrt2)))
	}
}

// invSqrt2Pi is 1/√(2π), the normal density's constant.
var invSqrt2Pi = 1 / math.Sqrt(2*math.Pi)

// geluBackward is dx = dy*(Φ(x) + x*φ(x)) with Φ(x) = y/x from the forward
// output y = x*Φ(x): as accurate as y (relative to Φ, also in the lower
// tail) and one division instead of an erfc. At x = 0 and where y is zero
// or subnormal, Φ is evaluated directly.
func geluBackward[F float](dx, x, y, dy []F, exp func(float64) float64) {
	for i, v := range x {
		f := float64(v)
		var cdf float64
		if yv := float64(y[i]); f != 0 && math.Abs(yv) >= 1e-37 {
			cdf = yv / f
		} else {
			cdf = 0.5 * math.Erfc(-f/math.Sqrt2)
		}
		pdf := exp(-0.5*f*f) * invSqrt2Pi
		dx[i] = F(float64(dy[i]) * (cdf + f*pdf))
	}
}

// geluForward32 computes Φ(x) = erfc(-x/√2)/2 with erfcFast (math.Erfc's
// approximation) in float64, so Φ is accurate relative to itself also in
// the lower tail, where 1+erf(x/√2) cancels in float32. (PyTorch's CPU
// kernel uses float32 and the Abramowitz-Stegun erf, absolute error
// 1.5e-7; the two agree to within 1.5e-7 absolute, far inside the 1e-4
// parity tolerance.)
func geluForward32(y, x []float32) {
	for i, v := range x {
		f := float64(v)
		y[i] = float32(f * 0.5 * erfcFast(-f/math.Sqrt2))
	}
}
