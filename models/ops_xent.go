package models

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// CrossEntropy is the mean over the N rows of logits (N, V) of
// -log softmax(row)[target], with targets an Int vector (N): log-softmax
// and the negative log-likelihood fused, each row shifted by its maximum
// (F.cross_entropy in the reference). The result is a scalar. Its gradient
// is CrossEntropyGrad(logits, targets, dloss) = (softmax - onehot)*dloss/N.
func CrossEntropy(logits, targets *G.Node) (*G.Node, error) {
	return G.ApplyOp(xentOp{}, logits, targets)
}

type xentOp struct {
	opBase
	grad bool // the backward op: (logits, targets, dloss) -> dlogits
}

func (op xentOp) Arity() int {
	if op.grad {
		return 3
	}
	return 2
}
func (op xentOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(tt(2, a), tt(1, tensor.Int), a, tt(2, a))
	}
	return hm.NewFnType(tt(2, a), tt(1, tensor.Int), a)
}
func (op xentOp) check(in []tensor.Shape) error {
	l, t := in[0], in[1]
	if l.Dims() != 2 || t.TotalSize() != l[0] {
		return fmt.Errorf("%v: logits %v and targets %v, want (N, V) and (N)", op, l, t)
	}
	return nil
}
func (op xentOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s := shapesOf(in)
	if err := op.check(s); err != nil {
		return nil, err
	}
	if op.grad {
		return s[0].Clone(), nil
	}
	return tensor.ScalarShape(), nil
}
func (op xentOp) Do(in ...G.Value) (G.Value, error) {
	if op.grad {
		return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
	}
	var out G.Value = G.NewF64(0)
	if in[0].Dtype() == tensor.Float32 {
		out = G.NewF32(0)
	}
	return op.UsePreallocDo(out, in...)
}

// targetsOf checks the Int targets against the vocabulary V.
func targetsOf(op string, v G.Value, V int) ([]int, error) {
	t, ok := v.Data().([]int)
	if !ok {
		return nil, fmt.Errorf("%s: targets are %T, want []int", op, v.Data())
	}
	for i, x := range t {
		if x < 0 || x >= V {
			return nil, fmt.Errorf("%s: target %d at row %d outside [0, %d)", op, x, i, V)
		}
	}
	return t, nil
}

func (op xentOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := op.check(valueShapes(in)); err != nil {
		return nil, err
	}
	if err := checkSameDtype(op.String(), in[0]); err != nil {
		return nil, err
	}
	V := in[0].Shape()[1]
	t, err := targetsOf(op.String(), in[1], V)
	if err != nil {
		return nil, err
	}
	if !op.grad {
		var loss float64
		switch l := in[0].Data().(type) {
		case []float32:
			loss = xentForward(l, t, V, expFast)
		case []float64:
			loss = xentForward(l, t, V, math.Exp)
		}
		switch o := out.(type) {
		case *G.F32:
			*o = G.F32(loss)
		case *G.F64:
			*o = G.F64(loss)
		case *tensor.Dense:
			if o.Size() != 1 {
				return nil, fmt.Errorf("%v: output buffer has shape %v, want a scalar", op, o.Shape())
			}
			switch d := o.Data().(type) {
			case []float32:
				d[0] = float32(loss)
			case []float64:
				d[0] = loss
			case float32:
				o.Set(0, float32(loss))
			case float64:
				o.Set(0, loss)
			}
		default:
			return nil, fmt.Errorf("%v: output buffer is %T", op, out)
		}
		return out, nil
	}
	dloss, err := scalarOf(op.String(), in[2])
	if err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	switch d := o.Data().(type) {
	case []float32:
		l := in[0].Data().([]float32)
		parallelRows(len(t), 2*V, func(lo, hi int) {
			xentBackward(d[lo*V:hi*V], l[lo*V:hi*V], t[lo:hi], V, dloss/float64(len(t)), expFast)
		})
	case []float64:
		xentBackward(d, in[0].Data().([]float64), t, V, dloss/float64(len(t)), math.Exp)
	}
	return o, nil
}
func (op xentOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op xentOp) Hashcode() uint32      { return hashOf(op) }
func (op xentOp) String() string {
	if op.grad {
		return "CrossEntropyGrad"
	}
	return "CrossEntropy"
}
func (op xentOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	r[0] = !op.grad
	return r
}
func (op xentOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	d, err := G.ApplyOp(xentOp{grad: true}, in[0], in[1], grad)
	return G.Nodes{d, nil}, err
}

// rowLogSumExp is log Σ exp(row), shifted by the row's maximum.
func rowLogSumExp[F float](row []F, exp func(float64) float64) (lse, m float64) {
	m = math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += exp(float64(v) - m)
	}
	return m + math.Log(sum), m
}

func xentForward[F float](logits []F, t []int, V int, exp func(float64) float64) float64 {
	var total float64
	for n, tg := range t {
		row := logits[n*V : (n+1)*V]
		lse, _ := rowLogSumExp(row, exp)
		total += lse - float64(row[tg])
	}
	return total / float64(len(t))
}

// xentBackward writes (softmax(row) - onehot(target))*k for each row; k is
// dloss/N.
func xentBackward[F float](d, logits []F, t []int, V int, k float64, exp func(float64) float64) {
	for n, tg := range t {
		row, dr := logits[n*V:(n+1)*V], d[n*V:(n+1)*V]
		lse, _ := rowLogSumExp(row, exp)
		for j, v := range row {
			dr[j] = F(exp(float64(v)-lse) * k)
		}
		dr[tg] = F((exp(float64(row[tg])-lse) - 1) * k)
	}
}
