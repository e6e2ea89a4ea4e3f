package models

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// AddBias returns x + b with b (C) added to every row of x (N, C): the
// bias of a Linear layer, without materialising a broadcast copy of b.
func AddBias(x, b *G.Node) (*G.Node, error) { return G.ApplyOp(addBiasOp{}, x, b) }

// ColSum returns the column sums of x (N, C) as a (C) vector: the
// gradient of a bias.
func ColSum(x *G.Node) (*G.Node, error) { return G.ApplyOp(colSumOp{}, x) }

type addBiasOp struct{ opBase }

func (addBiasOp) Arity() int { return 2 }
func (addBiasOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(1, a), tt(2, a))
}
func (addBiasOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	x, b := shapeOf(in[0]), shapeOf(in[1])
	if x.Dims() != 2 || b.TotalSize() != x[1] {
		return nil, fmt.Errorf("AddBias: shapes %v and %v, want (N, C) and (C)", x, b)
	}
	return x.Clone(), nil
}
func (op addBiasOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (addBiasOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := checkSameDtype("AddBias", in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc("AddBias", out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	switch y := o.Data().(type) {
	case []float32:
		addBias(y, in[0].Data().([]float32), in[1].Data().([]float32))
	case []float64:
		addBias(y, in[0].Data().([]float64), in[1].Data().([]float64))
	}
	return o, nil
}
func (addBiasOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "AddBias") }
func (op addBiasOp) Hashcode() uint32   { return hashOf(op) }
func (addBiasOp) String() string        { return "AddBias" }
func (addBiasOp) DiffWRT(int) []bool    { return []bool{true, true} }
func (addBiasOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	db, err := ColSum(grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{grad, db}, nil
}

func addBias[F float](y, x, b []F) {
	C := len(b)
	for r := 0; r+C <= len(x); r += C {
		yr, xr := y[r:r+C], x[r:r+C]
		for c, bv := range b {
			yr[c] = xr[c] + bv
		}
	}
}

type colSumOp struct{ opBase }

func (colSumOp) Arity() int { return 1 }
func (colSumOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(1, a))
}
func (colSumOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	x := shapeOf(in[0])
	if x.Dims() != 2 {
		return nil, fmt.Errorf("ColSum: shape %v, want (N, C)", x)
	}
	return tensor.Shape{x[1]}, nil
}
func (op colSumOp) Do(in ...G.Value) (G.Value, error) {
	s := in[0].Shape()
	if s.Dims() != 2 {
		return nil, fmt.Errorf("ColSum: shape %v, want (N, C)", s)
	}
	return op.UsePreallocDo(newLike(in[0], tensor.Shape{s[1]}), in...)
}
func (colSumOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := checkSameDtype("ColSum", in...); err != nil {
		return nil, err
	}
	s := in[0].Shape()
	o, err := checkPrealloc("ColSum", out, tensor.Shape{s[1]}, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	switch y := o.Data().(type) {
	case []float32:
		colSum(y, in[0].Data().([]float32))
	case []float64:
		colSum(y, in[0].Data().([]float64))
	}
	return o, nil
}
func (colSumOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "ColSum") }
func (op colSumOp) Hashcode() uint32   { return hashOf(op) }
func (colSumOp) String() string        { return "ColSum" }

// colSum sums the rows of x into y, accumulating in float64 like a
// reduction should.
func colSum[F float](y, x []F) {
	C := len(y)
	acc := make([]float64, C)
	for r := 0; r+C <= len(x); r += C {
		for c, v := range x[r : r+C] {
			acc[c] += float64(v)
		}
	}
	for c := range y {
		y[c] = F(acc[c])
	}
}
