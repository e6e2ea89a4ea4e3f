package models

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// lnEps is nn.LayerNorm's default epsilon, the reference's.
const lnEps = 1e-5

// LayerNorm normalises each row of x (N, C) to zero mean and unit
// variance (biased, eps 1e-5 inside the square root) and applies the
// elementwise affine w (C), b (C), as torch.nn.LayerNorm. Its gradient
// is three ops: LayerNormGradX, LayerNormGradW and ColSum.
func LayerNorm(x, w, b *G.Node) (*G.Node, error) { return G.ApplyOp(lnOp{}, x, w, b) }

// rowStats returns the mean and 1/sqrt(var+eps) of row x.
func rowStats[F float](x []F) (mean, rstd float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	var vr float64
	for _, v := range x {
		d := float64(v) - mean
		vr += d * d
	}
	vr /= float64(len(x))
	return mean, 1 / math.Sqrt(vr+lnEps)
}

func lnCheck(op string, in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if x.Dims() != 2 {
		return nil, fmt.Errorf("%s: x shape %v, want (N, C)", op, x)
	}
	for _, s := range in[1:] {
		if s.Dims() == 1 && s[0] != x[1] {
			return nil, fmt.Errorf("%s: shapes %v and %v do not agree", op, x, s)
		}
		if s.Dims() == 2 && !s.Eq(x) {
			return nil, fmt.Errorf("%s: shapes %v and %v do not agree", op, x, s)
		}
	}
	return x.Clone(), nil
}

func shapesOf(in []G.DimSizer) []tensor.Shape {
	out := make([]tensor.Shape, len(in))
	for i, d := range in {
		out[i] = shapeOf(d)
	}
	return out
}

func valueShapes(in []G.Value) []tensor.Shape {
	out := make([]tensor.Shape, len(in))
	for i, v := range in {
		out[i] = v.Shape()
	}
	return out
}

// lnOp: (x (N, C), w (C), b (C)) -> (N, C).
type lnOp struct{ opBase }

func (lnOp) Arity() int { return 3 }
func (lnOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(1, a), tt(1, a), tt(2, a))
}
func (lnOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return lnCheck("LayerNorm", shapesOf(in))
}
func (op lnOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (lnOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := lnCheck("LayerNorm", valueShapes(in))
	if err != nil {
		return nil, err
	}
	if err := checkSameDtype("LayerNorm", in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc("LayerNorm", out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	C := s[1]
	switch y := o.Data().(type) {
	case []float32:
		x, w, b := in[0].Data().([]float32), in[1].Data().([]float32), in[2].Data().([]float32)
		parallelRows(s[0], 3*C, func(lo, hi int) { lnForward(y[lo*C:hi*C], x[lo*C:hi*C], w, b) })
	case []float64:
		lnForward(y, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64))
	}
	return o, nil
}
func (lnOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "LayerNorm") }
func (op lnOp) Hashcode() uint32   { return hashOf(op) }
func (lnOp) String() string        { return "LayerNorm" }
func (lnOp) DiffWRT(int) []bool    { return []bool{true, true, true} }
func (lnOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(lnGradXOp{}, in[0], in[1], grad)
	if err != nil {
		return nil, err
	}
	dw, err := G.ApplyOp(lnGradWOp{}, in[0], grad)
	if err != nil {
		return nil, err
	}
	db, err := ColSum(grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{dx, dw, db}, nil
}

func lnForward[F float](y, x, w, b []F) {
	C := len(w)
	for r := 0; r+C <= len(x); r += C {
		xr, yr := x[r:r+C], y[r:r+C]
		mean, rstd := rowStats(xr)
		for c, v := range xr {
			yr[c] = F((float64(v)-mean)*rstd)*w[c] + b[c]
		}
	}
}

// lnGradXOp: (x (N, C), w (C), dy (N, C)) -> dx (N, C), with
// xhat = (x-mean)*rstd, g = dy*w: dx = rstd*(g - mean(g) - xhat*mean(g*xhat)).
type lnGradXOp struct{ opBase }

func (lnGradXOp) Arity() int { return 3 }
func (lnGradXOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(1, a), tt(2, a), tt(2, a))
}
func (lnGradXOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return lnCheck("LayerNormGradX", shapesOf(in))
}
func (op lnGradXOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (lnGradXOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := lnCheck("LayerNormGradX", valueShapes(in))
	if err != nil {
		return nil, err
	}
	if err := checkSameDtype("LayerNormGradX", in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc("LayerNormGradX", out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	C := s[1]
	switch dx := o.Data().(type) {
	case []float32:
		x, w, dy := in[0].Data().([]float32), in[1].Data().([]float32), in[2].Data().([]float32)
		parallelRows(s[0], 5*C, func(lo, hi int) { lnBackwardX(dx[lo*C:hi*C], x[lo*C:hi*C], w, dy[lo*C:hi*C]) })
	case []float64:
		lnBackwardX(dx, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64))
	}
	return o, nil
}
func (lnGradXOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "LayerNormGradX") }
func (op lnGradXOp) Hashcode() uint32   { return hashOf(op) }
func (lnGradXOp) String() string        { return "LayerNormGradX" }

func lnBackwardX[F float](dx, x, w, dy []F) {
	C := len(w)
	n := float64(C)
	for r := 0; r+C <= len(x); r += C {
		xr, dyr, dxr := x[r:r+C], dy[r:r+C], dx[r:r+C]
		mean, rstd := rowStats(xr)
		var sg, sgx float64
		for c := range xr {
			g := float64(dyr[c]) * float64(w[c])
			sg += g
			sgx += g * (float64(xr[c]) - mean) * rstd
		}
		sg /= n
		sgx /= n
		for c := range xr {
			g := float64(dyr[c]) * float64(w[c])
			xhat := (float64(xr[c]) - mean) * rstd
			dxr[c] = F(rstd * (g - sg - xhat*sgx))
		}
	}
}

// lnGradWOp: (x (N, C), dy (N, C)) -> dw (C) = sum over rows of dy*xhat.
type lnGradWOp struct{ opBase }

func (lnGradWOp) Arity() int { return 2 }
func (lnGradWOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(2, a), tt(1, a))
}
func (lnGradWOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s, err := lnCheck("LayerNormGradW", shapesOf(in))
	if err != nil {
		return nil, err
	}
	return tensor.Shape{s[1]}, nil
}
func (op lnGradWOp) Do(in ...G.Value) (G.Value, error) {
	s, err := lnCheck("LayerNormGradW", valueShapes(in))
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(newLike(in[0], tensor.Shape{s[1]}), in...)
}
func (lnGradWOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := lnCheck("LayerNormGradW", valueShapes(in))
	if err != nil {
		return nil, err
	}
	if err := checkSameDtype("LayerNormGradW", in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc("LayerNormGradW", out, tensor.Shape{s[1]}, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	switch dw := o.Data().(type) {
	case []float32:
		lnBackwardW(dw, in[0].Data().([]float32), in[1].Data().([]float32))
	case []float64:
		lnBackwardW(dw, in[0].Data().([]float64), in[1].Data().([]float64))
	}
	return o, nil
}
func (lnGradWOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "LayerNormGradW") }
func (op lnGradWOp) Hashcode() uint32   { return hashOf(op) }
func (lnGradWOp) String() string        { return "LayerNormGradW" }

func lnBackwardW[F float](dw, x, dy []F) {
	C := len(dw)
	acc := make([]float64, C)
	for r := 0; r+C <= len(x); r += C {
		xr, dyr := x[r:r+C], dy[r:r+C]
		mean, rstd := rowStats(xr)
		for c, v := range xr {
			acc[c] += float64(dyr[c]) * (float64(v) - mean) * rstd
		}
	}
	for c := range dw {
		dw[c] = F(acc[c])
	}
}
