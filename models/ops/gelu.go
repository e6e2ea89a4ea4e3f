package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
	"gptlab/planner/arena"
)

// GELU is the exact GELU, x*Φ(x) = 0.5*x*(1+erf(x/√2)), as torch's
// F.gelu with approximate="none"; elementwise, any shape. Its gradient is
// GELUGrad(x, y, dy) = dy*(Φ(x) + x*φ(x)), which reads Φ(x) = y/x off the
// forward output y in float64. The float32 kernels are vec.GELU and
// vec.GELUGrad (a vectorised erfc, within 4 ulp; the gradient does not
// read y).
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
	return op.UsePreallocDo(tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.Of(readDtype(in[len(in)-1]))), in...)
}
func (op geluOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if _, err := op.check(valueShapes(in)); err != nil {
		return nil, err
	}
	for _, v := range in {
		if v.Dtype() == tensor.Uint16 { // bf16 bits (ReadsBF16): the float32 kernel on them widened
			o, err := checkPrealloc(op.String(), out, in[0].Shape(), tensor.Float32)
			if err != nil {
				return nil, err
			}
			return runReadingBF16(op, op.String(), o, in)
		}
	}
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	y, ok := o.Data().([]float64)
	if !ok {
		return runFloat32(op, op.String(), o, in)
	}
	if op.grad {
		geluBackward(y, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64))
	} else {
		geluForward(y, in[0].Data().([]float64))
	}
	return o, nil
}

// BindKernel implements arena.Kernel.
func (op geluOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: elementwise, so the output may
// overwrite any input (the planner decides whether that input is still
// needed; GELU's is, by its gradient, when training).
func (op geluOp) InPlaceInputs() []int {
	if op.grad {
		return []int{2, 1, 0}
	}
	return []int{0}
}

// geluGrain is the elements of one row of a GELU split.
const geluGrain = 1024

// ReadsBF16 implements arena.BF16Reader: GELU and GELUGrad read x and
// dy as bf16 bits by widening them a row of the split at a time into
// scratch of the row's chunk and running the float32 kernel there (the
// same bits); GELUGrad does not read the forward output at all.
func (geluOp) ReadsBF16(int) bool { return true }

func (op geluOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	if err := checkF32(op.String(), out); err != nil {
		return nil, err
	}
	bf16 := false
	for i, b := range in {
		if !b.Is(arena.F32) && !b.Is(arena.BF16) {
			return nil, fmt.Errorf("%v: input %d of %v, want f32 or bf16 storage of shape %v", op, i, b.Dtype, b.Shape)
		}
		bf16 = bf16 || b.Is(arena.BF16) && (!op.grad || i != 1)
	}
	if s, err := op.check(shapesOfBufs(in)); err != nil {
		return nil, err
	} else if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	n := len(out.F32)
	rows := (n + geluGrain - 1) / geluGrain
	y, x := out.F32, in[0].F32
	dy := in[len(in)-1] // GELUGrad's in[1], the forward output, is not needed
	if !bf16 {
		if op.grad {
			return par.New(rows, 4*geluGrain, func(lo, hi int) {
				lo, hi = lo*geluGrain, min(hi*geluGrain, n)
				vec.GELUGrad(y[lo:hi], x[lo:hi], dy.F32[lo:hi])
			}).Run, nil
		}
		return par.New(rows, 4*geluGrain, func(lo, hi int) {
			lo, hi = lo*geluGrain, min(hi*geluGrain, n)
			vec.GELU(y[lo:hi], x[lo:hi])
		}).Run, nil
	}
	var split *par.Split
	var wide []float32 // each chunk's row of x and of dy, widened
	split = par.New(rows, 4*geluGrain, func(lo, hi int) {
		w := wide[split.ChunkOf(lo)*2*geluGrain:][:2*geluGrain]
		for r := lo; r < hi; r++ {
			a, b := r*geluGrain, min(r*geluGrain+geluGrain, n)
			xs := widened(x, in[0].U16, a, b, w[:geluGrain])
			if op.grad {
				vec.GELUGrad(y[a:b], xs, widened(dy.F32, dy.U16, a, b, w[geluGrain:]))
			} else {
				vec.GELU(y[a:b], xs)
			}
		}
	})
	wide = make([]float32, split.Chunks()*2*geluGrain)
	return split.Run, nil
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

// geluForward is the float64 reference kernel (math.Erf).
func geluForward[F float](y, x []F) {
	for i, v := range x {
		f := float64(v)
		y[i] = F(0.5 * f * (1 + math.Erf(f/math.Sqrt2)))
	}
}

// invSqrt2Pi is 1/√(2π), the normal density's constant.
const invSqrt2Pi = 0.3989422804014327

// geluBackward is the float64 reference kernel of the gradient, with
// math.Erfc and math.Exp.
func geluBackward(dx, x, y, dy []float64) {
	for i, f := range x {
		var cdf float64
		if f != 0 && math.Abs(y[i]) >= 1e-300 {
			cdf = y[i] / f
		} else {
			cdf = 0.5 * math.Erfc(-f/math.Sqrt2)
		}
		dx[i] = dy[i] * (cdf + f*math.Exp(-0.5*f*f)*invSqrt2Pi)
	}
}
