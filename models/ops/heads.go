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

// SplitHeads rearranges x (B*T, C) into heads (B*H, T, hs), hs = C/H:
// view(B, T, H, hs).transpose(1, 2) in the reference, as one copy loop
// (gorgonia's general 4-D Transpose walks an iterator per element). Its
// gradient is MergeHeads, and MergeHeads' is SplitHeads.
func SplitHeads(x *G.Node, B, T, H int) (*G.Node, error) {
	return G.ApplyOp(headsOp{B: B, T: T, H: H}, x)
}

// MergeHeads is the inverse of SplitHeads: (B*H, T, hs) -> (B*T, C).
func MergeHeads(x *G.Node, B, T, H int) (*G.Node, error) {
	return G.ApplyOp(headsOp{B: B, T: T, H: H, merge: true}, x)
}

type headsOp struct {
	opBase
	B, T, H int
	merge   bool
}

func (op headsOp) Arity() int { return 1 }
func (op headsOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.merge {
		return hm.NewFnType(tt(3, a), tt(2, a))
	}
	return hm.NewFnType(tt(2, a), tt(3, a))
}

// shapes returns the (B*T, C) and (B*H, T, hs) shapes implied by input s.
func (op headsOp) outShape(s tensor.Shape) (tensor.Shape, error) {
	if op.merge {
		if s.Dims() != 3 || s[0] != op.B*op.H || s[1] != op.T {
			return nil, fmt.Errorf("%v: input %v, want (%d, %d, hs)", op, s, op.B*op.H, op.T)
		}
		return tensor.Shape{op.B * op.T, op.H * s[2]}, nil
	}
	if s.Dims() != 2 || s[0] != op.B*op.T || s[1]%op.H != 0 {
		return nil, fmt.Errorf("%v: input %v, want (%d, C) with C divisible by %d", op, s, op.B*op.T, op.H)
	}
	return tensor.Shape{op.B * op.H, op.T, s[1] / op.H}, nil
}
func (op headsOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.outShape(shapeOf(in[0]))
}
func (op headsOp) Do(in ...G.Value) (G.Value, error) {
	s, err := op.outShape(in[0].Shape())
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(newLike(in[0], s), in...)
}
func (op headsOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := op.outShape(in[0].Shape())
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
	if y, ok := o.Data().([]float64); ok {
		permuteHeads(y, in[0].Data().([]float64), op.B, op.T, op.H, op.merge, 0, op.B*op.T)
		return o, nil
	}
	return runFloat32(op, op.String(), o, in)
}

// BindKernel implements arena.Kernel.
func (op headsOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op headsOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if err := checkF32(op.String(), out, in[0]); err != nil {
		return nil, err
	}
	s, err := op.outShape(in[0].Shape)
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	y, x := out.F32, in[0].F32
	// rows (b, t) split across the pool: each writes its own H pieces
	return par.New(op.B*op.T, 2*len(x)/(op.B*op.T), func(lo, hi int) {
		permuteHeads(y, x, op.B, op.T, op.H, op.merge, lo, hi)
	}).Run, nil
}
func (op headsOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op headsOp) Hashcode() uint32      { return hashOf(op) }
func (op headsOp) String() string {
	if op.merge {
		return fmt.Sprintf("MergeHeads{%d,%d,%d}", op.B, op.T, op.H)
	}
	return fmt.Sprintf("SplitHeads{%d,%d,%d}", op.B, op.T, op.H)
}
func (op headsOp) DiffWRT(int) []bool { return []bool{true} }
func (op headsOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	inv := op
	inv.merge = !op.merge
	d, err := G.ApplyOp(inv, grad)
	return G.Nodes{d}, err
}

// permuteHeads copies rows [lo, hi) of the B·T rows (b, t) between
// (B, T, H, hs) and (B, H, T, hs) layouts: split reads the first and
// writes the second, merge the reverse.
func permuteHeads[F float](dst, src []F, B, T, H int, merge bool, lo, hi int) {
	hs := len(src) / (B * T * H)
	C := H * hs
	for row := lo; row < hi; row++ {
		b, t := row/T, row%T
		for h := range H {
			bth := row*C + h*hs         // (B, T, H, hs)
			bht := ((b*H+h)*T + t) * hs // (B, H, T, hs)
			if merge {
				copy(dst[bth:bth+hs], src[bht:bht+hs])
			} else {
				copy(dst[bht:bht+hs], src[bth:bth+hs])
			}
		}
	}
}
