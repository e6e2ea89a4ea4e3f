package arena

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/precision"
)

// CastOp converts a tensor between float32 and a narrower storage type:
// to bf16 or fp16 (round to nearest even, as package precision converts)
// and back, or to int8 (rounded to nearest even and saturated to
// [-128, 127], NaN to 0: a quantized operand, before any scale) and back.
// Its output is planned at the narrow type's real size: a bf16 activation
// takes 2 bytes an element in the arena. The 16-bit casts are
// differentiable (the gradient is cast the other way: gradients cross the
// op boundary in the storage format); the int8 casts are not.
type CastOp struct {
	opBase
	From, To Dtype
	Dims     int
}

// Cast is the node x converted to type to; from is x's type (needed for
// 16-bit storage, whose format gorgonia does not know).
func Cast(x *gorgonia.Node, from, to Dtype) (*gorgonia.Node, error) {
	op := CastOp{From: from, To: to}
	if err := op.valid(); err != nil {
		return nil, err
	}
	op.Dims = x.Dims()
	return gorgonia.ApplyOp(op, x)
}

// valid reports a conversion this op does not make.
func (op CastOp) valid() error {
	narrow := func(d Dtype) bool { return d == BF16 || d == FP16 || d == Int8 }
	if op.From == F32 && narrow(op.To) || narrow(op.From) && op.To == F32 {
		return nil
	}
	return fmt.Errorf("arena: no cast from %v to %v (f32 to or from bf16, fp16, int8)", op.From, op.To)
}

// Name is the op's kind.
func (CastOp) Name() string      { return "Cast" }
func (op CastOp) String() string { return fmt.Sprintf("Cast{%v→%v}", op.From, op.To) }
func (CastOp) Arity() int        { return 1 }
func (op CastOp) Type() hm.Type {
	return hm.NewFnType(tensorType(op.Dims, op.From.Tensor()), tensorType(op.Dims, op.To.Tensor()))
}

// OutDtype implements Typer.
func (op CastOp) OutDtype() Dtype { return op.To }

func (op CastOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return shapesOf(in)[0].Clone(), nil
}

func (op CastOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	return op.UsePreallocDo(alloc(op.To, in[0].Shape()), in...)
}

func (op CastOp) UsePreallocDo(out gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return runOnce(op, op.String(), op.To, out, in, op.From)
}

// BindKernel implements Kernel.
func (op CastOp) BindKernel(out Buf, in []Buf) (func(), bool) { return bindKernel(op, out, in) }

// castGrain is the elements of one row of a cast's split.
const castGrain = 8192

func (op CastOp) bind(out Buf, in []Buf) (func(), error) {
	if err := op.valid(); err != nil {
		return nil, err
	}
	if err := checkBufs(op.String(), out, in, op.To, op.From); err != nil {
		return nil, err
	}
	if !out.Shape.Eq(in[0].Shape) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, in[0].Shape)
	}
	x := in[0]
	var f func(lo, hi int)
	switch {
	case op.To == BF16:
		f = func(lo, hi int) { precision.EncodeBF16(out.U16[lo:hi], x.F32[lo:hi]) }
	case op.To == FP16:
		f = func(lo, hi int) { precision.EncodeFP16(out.U16[lo:hi], x.F32[lo:hi]) }
	case op.From == BF16:
		f = func(lo, hi int) { precision.DecodeBF16(out.F32[lo:hi], x.U16[lo:hi]) }
	case op.From == FP16:
		f = func(lo, hi int) { precision.DecodeFP16(out.F32[lo:hi], x.U16[lo:hi]) }
	case op.To == Int8:
		f = func(lo, hi int) { toInt8(out.I8[lo:hi], x.F32[lo:hi]) }
	default:
		f = func(lo, hi int) {
			for i, v := range x.I8[lo:hi] {
				out.F32[lo+i] = float32(v)
			}
		}
	}
	n := out.Len()
	return par.New((n+castGrain-1)/castGrain, castGrain, func(lo, hi int) {
		f(lo*castGrain, min(hi*castGrain, n))
	}).Run, nil
}

// toInt8 rounds each x to the nearest integer (ties to even), saturated
// to [-128, 127]; NaN becomes 0.
func toInt8(dst []int8, x []float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		r := math.RoundToEven(float64(v))
		switch {
		case r != r:
			dst[i] = 0
		case r > 127:
			dst[i] = 127
		case r < -128:
			dst[i] = -128
		default:
			dst[i] = int8(r)
		}
	}
}

func (op CastOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op CastOp) Hashcode() uint32      { return hashString(op.String()) }

func (op CastOp) DiffWRT(int) []bool { return []bool{op.From != Int8 && op.To != Int8} }

// SymDiff casts the gradient back to the input's type. A cast up's
// gradient that is itself a cast up from the same 16-bit type (a
// gradient passed on unchanged, as a residual add passes its own) is the
// 16-bit value it widens: narrowing a widened value gives its bits back,
// so that cast down would copy it (the baby step under bf16 had eight).
func (op CastOp) SymDiff(in gorgonia.Nodes, out, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	if op.From == Int8 || op.To == Int8 {
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	if g, ok := grad.Op().(CastOp); ok && op.To == F32 && g.From == op.From && g.To == F32 {
		if it := grad.Graph().From(grad.ID()); it.Len() == 1 && it.Next() {
			return gorgonia.Nodes{it.Node().(*gorgonia.Node)}, nil
		}
	}
	d, err := Cast(grad, op.To, op.From)
	return gorgonia.Nodes{d}, err
}
