package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/planner/arena"
)

// lnEps is nn.LayerNorm's default epsilon, the reference's.
const lnEps = 1e-5

// LayerNorm normalises each row of x (N, C) to zero mean and unit
// variance (biased, eps 1e-5 inside the square root) and applies the
// elementwise affine w (C), b (C), as torch.nn.LayerNorm. Its gradient
// is three ops: LayerNormGradX, LayerNormGradW and ColSum.
func LayerNorm(x, w, b *G.Node) (*G.Node, error) { return G.ApplyOp(lnOp{}, x, w, b) }

// rowStats returns the mean and 1/sqrt(var+eps) of row x, from Σx and
// Σx² in one pass, in float64: var = Σx²/n - mean² loses about
// mean²/var·1e-16 of its relative precision, negligible for LayerNorm's
// inputs (a row whose mean exceeds its spread 1e4 times would still get
// var to 1e-8).
func rowStats[F float](x []F) (mean, rstd float64) {
	s, ss := moments4(x)
	return lnStats(s, ss, len(x))
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
func (op lnOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
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
	if y, ok := o.Data().([]float64); ok {
		lnForward(y, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64))
		return o, nil
	}
	return runFloat32(op, "LayerNorm", o, in)
}

// BindKernel implements arena.Kernel.
func (op lnOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: a row of y is written after its
// row of x has been read for the statistics, and y[i] reads only x[i].
func (lnOp) InPlaceInputs() []int { return []int{0} }

func (lnOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	N, C, err := lnBind("LayerNorm", 3, out, in, true)
	if err != nil {
		return nil, err
	}
	if in[1].Shape.Dims() != 1 || in[2].Shape.Dims() != 1 {
		return nil, fmt.Errorf("LayerNorm: shapes %v, want (N, C), (C), (C)", shapesOfBufs(in))
	}
	y, x, w, b := out.F32, in[0].F32, in[1].F32, in[2].F32
	return par.New(N, 3*C, func(lo, hi int) {
		lnForward32(y[lo*C:hi*C], x[lo*C:hi*C], w, b)
	}).Run, nil
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

// lnBind checks the float32 buffers of a LayerNorm op with arity inputs
// (x first, (N, C)) and returns N and C; rowOut: the output is (N, C),
// else (C).
func lnBind(op string, arity int, out arena.Buf, in []arena.Buf, rowOut bool) (N, C int, err error) {
	if len(in) != arity {
		return 0, 0, fmt.Errorf("%s: %d inputs, want %d", op, len(in), arity)
	}
	if err := checkF32(op, append([]arena.Buf{out}, in...)...); err != nil {
		return 0, 0, err
	}
	s, err := lnCheck(op, shapesOfBufs(in))
	if err != nil {
		return 0, 0, err
	}
	for _, b := range in[1:] {
		if b.Shape.Dims() != 1 && b.Shape.Dims() != 2 {
			return 0, 0, fmt.Errorf("%s: input shape %v, want (C) or (N, C)", op, b.Shape)
		}
	}
	want := tensor.Shape{s[1]}
	if rowOut {
		want = s
	}
	if !out.Shape.Eq(want) {
		return 0, 0, fmt.Errorf("%s: output %v, want %v", op, out.Shape, want)
	}
	return s[0], s[1], nil
}

// lnForward normalises the rows of x into y (which may be x).
func lnForward[F float](y, x, w, b []F) {
	C := len(w)
	b = b[:C]
	for r := 0; r+C <= len(x); r += C {
		xr := x[r : r+C]
		yr := y[r : r+C]
		xr, yr = xr[:C], yr[:C]
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
func (op lnGradXOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
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
	if dx, ok := o.Data().([]float64); ok {
		lnBackwardX(dx, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64))
		return o, nil
	}
	return runFloat32(op, "LayerNormGradX", o, in)
}

// BindKernel implements arena.Kernel.
func (op lnGradXOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: a row of dx is written after
// the row sums, and dx[i] reads x[i] and dy[i] alone.
func (lnGradXOp) InPlaceInputs() []int { return []int{2, 0} }

func (lnGradXOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	N, C, err := lnBind("LayerNormGradX", 3, out, in, true)
	if err != nil {
		return nil, err
	}
	if in[1].Shape.Dims() != 1 || in[2].Shape.Dims() != 2 {
		return nil, fmt.Errorf("LayerNormGradX: shapes %v, want (N, C), (C), (N, C)", shapesOfBufs(in))
	}
	dx, x, w, dy := out.F32, in[0].F32, in[1].F32, in[2].F32
	return par.New(N, 5*C, func(lo, hi int) {
		lnBackwardX32(dx[lo*C:hi*C], x[lo*C:hi*C], w, dy[lo*C:hi*C])
	}).Run, nil
}
func (lnGradXOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "LayerNormGradX") }
func (op lnGradXOp) Hashcode() uint32   { return hashOf(op) }
func (lnGradXOp) String() string        { return "LayerNormGradX" }

// lnBackwardX writes dx (which may be x or dy) row by row.
func lnBackwardX[F float](dx, x, w, dy []F) {
	C := len(w)
	n := float64(C)
	for r := 0; r+C <= len(x); r += C {
		xr := x[r : r+C]
		dyr := dy[r : r+C]
		dxr := dx[r : r+C]
		xr, dyr, dxr = xr[:C], dyr[:C], dxr[:C]
		sx, sxx, sg, sgx := lnGradSums(xr, w, dyr)
		mean, rstd := lnStats(sx, sxx, C)
		sgx = rstd * (sgx - mean*sg) / n // mean of g·xhat
		sg /= n
		for c, wv := range w {
			g := float64(dyr[c]) * float64(wv)
			xhat := (float64(xr[c]) - mean) * rstd
			dxr[c] = F(rstd * (g - sg - xhat*sgx))
		}
	}
}

// lnGradSums returns a row's Σx, Σx², Σg and Σg·x, g = dy·w, in one
// pass with two accumulators each (see reduce.go).
func lnGradSums[F float](x, w, dy []F) (sx, sxx, sg, sgx float64) {
	w, dy = w[:len(x)], dy[:len(x)]
	var a0, a1, b0, b1, c0, c1, d0, d1 float64
	for len(x) >= 2 {
		u, wv, d := x[:2], w[:2], dy[:2]
		x0, x1 := float64(u[0]), float64(u[1])
		g0, g1 := float64(d[0])*float64(wv[0]), float64(d[1])*float64(wv[1])
		a0 += x0
		a1 += x1
		b0 += x0 * x0
		b1 += x1 * x1
		c0 += g0
		c1 += g1
		d0 += g0 * x0
		d1 += g1 * x1
		x, w, dy = x[2:], w[2:], dy[2:]
	}
	for c, v := range x {
		x0, g := float64(v), float64(dy[c])*float64(w[c])
		a0 += x0
		b0 += x0 * x0
		c0 += g
		d0 += g * x0
	}
	return a0 + a1, b0 + b1, c0 + c1, d0 + d1
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
func (op lnGradWOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
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
	if dw, ok := o.Data().([]float64); ok {
		lnBackwardW(dw, in[0].Data().([]float64), in[1].Data().([]float64), make([]float64, s[1]))
		return o, nil
	}
	return runFloat32(op, "LayerNormGradW", o, in)
}

// BindKernel implements arena.Kernel.
func (op lnGradWOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (lnGradWOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	_, C, err := lnBind("LayerNormGradW", 2, out, in, false)
	if err != nil {
		return nil, err
	}
	if in[1].Shape.Dims() != 2 {
		return nil, fmt.Errorf("LayerNormGradW: shapes %v, want (N, C), (N, C)", shapesOfBufs(in))
	}
	// The rows' statistics split by rows, then the sums by blocks of
	// columns (colBlocks): each column is summed down the rows in order.
	dw, x, dy := out.F32, in[0].F32, in[1].F32
	N := len(x) / C
	stats, cb := make([]float64, 2*N), newColBlocks(C)
	rows := par.New(N, C, func(lo, hi int) { lnRowStats(stats, x, C, lo, hi) })
	cols := par.New(cb.n, 2*cb.w*N, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			c0, c1, acc := cb.block(b, C)
			lnBackwardW32(dw, x, dy, stats, acc, c0, c1)
		}
	})
	return func() {
		rows.Run()
		cols.Run()
	}, nil
}
func (lnGradWOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "LayerNormGradW") }
func (op lnGradWOp) Hashcode() uint32   { return hashOf(op) }
func (lnGradWOp) String() string        { return "LayerNormGradW" }

// lnBackwardW sums dy*xhat over the rows, in row order, in acc (of dw's
// length).
func lnBackwardW[F float](dw, x, dy []F, acc []float64) {
	C := len(dw)
	acc = acc[:C]
	clear(acc)
	for r := 0; r+C <= len(x); r += C {
		xr := x[r : r+C]
		dyr := dy[r : r+C]
		xr, dyr = xr[:C], dyr[:C]
		mean, rstd := rowStats(xr)
		for c, v := range xr {
			acc[c] += float64(dyr[c]) * (float64(v) - mean) * rstd
		}
	}
	for c, v := range acc {
		dw[c] = F(v)
	}
}
