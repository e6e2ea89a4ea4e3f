package models

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CausalSoftmax is softmax(scale*s) over the last axis of attention
// scores s (N, T, T) with the causal mask fused in: row i attends to
// columns 0..i, the rest are exactly 0 and never computed, as
// masked_fill(-inf) followed by softmax in the reference. Each row is
// shifted by its own maximum, so large scores cannot overflow. Its
// gradient is CausalSoftmaxGrad(y, dy) = scale*y*(dy - Σ y·dy).
func CausalSoftmax(s *G.Node, scale float64) (*G.Node, error) {
	return G.ApplyOp(causalSoftmaxOp{scale: scale}, s)
}

type causalSoftmaxOp struct {
	opBase
	scale float64
	grad  bool // the backward op: (y, dy) -> ds
}

func (op causalSoftmaxOp) Arity() int {
	if op.grad {
		return 2
	}
	return 1
}
func (op causalSoftmaxOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a))
	}
	return hm.NewFnType(tt(3, a), tt(3, a))
}
func (op causalSoftmaxOp) check(in []tensor.Shape) (tensor.Shape, error) {
	s := in[0]
	if s.Dims() != 3 || s[1] != s[2] {
		return nil, fmt.Errorf("%v: shape %v, want (N, T, T)", op, s)
	}
	if op.grad && !in[1].Eq(s) {
		return nil, fmt.Errorf("%v: shapes %v and %v differ", op, s, in[1])
	}
	return s.Clone(), nil
}
func (op causalSoftmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}
func (op causalSoftmaxOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (op causalSoftmaxOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	T := s[1]
	rows := s[0] * T // independent rows of T; a range [lo, hi) of them is [lo*T, hi*T)
	switch y := o.Data().(type) {
	case []float32:
		a := in[0].Data().([]float32)
		if op.grad {
			dy := in[1].Data().([]float32)
			parallelRows(rows, T, func(lo, hi int) {
				causalSoftmaxBackward(y[lo*T:hi*T], a[lo*T:hi*T], dy[lo*T:hi*T], T, lo, op.scale)
			})
		} else {
			parallelRows(rows, 2*T, func(lo, hi int) {
				causalSoftmaxForward(y[lo*T:hi*T], a[lo*T:hi*T], T, lo, op.scale, expFast)
			})
		}
	case []float64:
		if op.grad {
			causalSoftmaxBackward(y, in[0].Data().([]float64), in[1].Data().([]float64), T, 0, op.scale)
		} else {
			causalSoftmaxForward(y, in[0].Data().([]float64), T, 0, op.scale, math.Exp)
		}
	}
	return o, nil
}
func (op causalSoftmaxOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op causalSoftmaxOp) Hashcode() uint32      { return hashOf(op) }
func (op causalSoftmaxOp) String() string {
	if op.grad {
		return fmt.Sprintf("CausalSoftmaxGrad{%v}", op.scale)
	}
	return fmt.Sprintf("CausalSoftmax{%v}", op.scale)
}
func (op causalSoftmaxOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	r[0] = !op.grad
	return r
}
func (op causalSoftmaxOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	ds, err := G.ApplyOp(causalSoftmaxOp{scale: op.scale, grad: true}, out, grad)
	return G.Nodes{ds}, err
}

// causalSoftmaxForward: y[n,i,j] = exp(scale*s[n,i,j] - m) / Σ_{j'≤i} (…)
// for j ≤ i, where m is the row's maximum; 0 for j > i. s and y start at
// row first of the (N*T, T) matrix (for a split across goroutines).
func causalSoftmaxForward[F float](y, s []F, T, first int, scale float64, exp func(float64) float64) {
	for r := 0; r+T <= len(s); r += T {
		i := (first + r/T) % T // query position of this row
		sr, yr := s[r:r+T], y[r:r+T]
		m := math.Inf(-1)
		for _, v := range sr[:i+1] {
			m = math.Max(m, scale*float64(v))
		}
		var sum float64
		for j, v := range sr[:i+1] {
			e := exp(scale*float64(v) - m)
			sum += e
			yr[j] = F(e)
		}
		inv := 1 / sum
		for j := range yr[:i+1] {
			yr[j] = F(float64(yr[j]) * inv)
		}
		clear(yr[i+1:])
	}
}

// causalSoftmaxBackward: ds = scale*y*(dy - Σ_j y·dy) on j ≤ i, 0 above.
func causalSoftmaxBackward[F float](ds, y, dy []F, T, first int, scale float64) {
	for r := 0; r+T <= len(y); r += T {
		i := (first + r/T) % T
		yr, dyr, dsr := y[r:r+T], dy[r:r+T], ds[r:r+T]
		var dot float64
		for j := 0; j <= i; j++ {
			dot += float64(yr[j]) * float64(dyr[j])
		}
		for j := 0; j <= i; j++ {
			dsr[j] = F(scale * float64(yr[j]) * (float64(dyr[j]) - dot))
		}
		clear(dsr[i+1:])
	}
}
