package arena

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Kernel is implemented by ops that can run on fixed storage without
// allocating. BindKernel is called once, when the arena is laid out; the
// function it returns is called on every run and must write all of out.
// ok false means the op cannot run on these buffers (the executor then
// calls UsePreallocDo).
type Kernel interface {
	BindKernel(out Buf, in []Buf) (run func(), ok bool)
}

// The ops of this package follow one pattern: bind checks the buffers and
// returns the computation (an error says why it cannot run on them);
// BindKernel adapts it; UsePreallocDo binds it to the values given and
// runs it once, so the TapeMachine and the arena compute bitwise the same
// thing; Do allocates the output and calls UsePreallocDo.

// binder is the storage half of an op.
type binder interface {
	bind(out Buf, in []Buf) (func(), error)
}

// bindKernel adapts bind to Kernel.
func bindKernel(op binder, out Buf, in []Buf) (func(), bool) {
	run, err := op.bind(out, in)
	return run, err == nil
}

// runOnce binds op to the storage of out and in and runs it: the
// UsePreallocDo of every op here. outType is the element type of out
// (which says the format of 16-bit storage).
func runOnce(op binder, name string, outType Dtype, out gorgonia.Value, in []gorgonia.Value, inTypes ...Dtype) (gorgonia.Value, error) {
	o, ok := BufOf(out, outType)
	if !ok {
		return nil, fmt.Errorf("%s: output %T is not dense storage of %v", name, out, outType)
	}
	bufs := make([]Buf, len(in))
	for i, v := range in {
		dt := Dtype(0)
		if i < len(inTypes) {
			dt = inTypes[i]
		}
		if bufs[i], ok = BufOf(v, dt); !ok {
			return nil, fmt.Errorf("%s: input %d (%T) is not dense storage", name, i, v)
		}
	}
	run, err := op.bind(o, bufs)
	if err != nil {
		return nil, err
	}
	run()
	return out, nil
}

// shapedOp is an op of this package whose output shape follows from its
// inputs' shapes.
type shapedOp interface {
	binder
	String() string
	outShape(in []tensor.Shape) (tensor.Shape, error)
}

// runFloat is the Do (out nil: allocated) and UsePreallocDo of an op whose
// output has the float type of its first floats inputs (float32 or
// float64, all the same) and the shape outShape gives.
func runFloat(op shapedOp, out gorgonia.Value, in []gorgonia.Value, floats int) (gorgonia.Value, error) {
	s, err := op.outShape(valueShapes(in))
	if err != nil {
		return nil, err
	}
	d, err := floatType(op.String(), in[:floats]...)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = alloc(d, s)
	}
	return runOnce(op, op.String(), d, out, in)
}

// checkShaped is the check at the start of a shapedOp's bind: storage of
// the given types (see checkBufs; out's type first), and an output of the
// shape the op computes from its inputs, which it returns.
func checkShaped(op shapedOp, out Buf, in []Buf, outType Dtype, inTypes ...Dtype) (tensor.Shape, error) {
	if err := checkBufs(op.String(), out, in, outType, inTypes...); err != nil {
		return nil, err
	}
	s, err := op.outShape(bufShapes(in))
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	return s, nil
}

// alloc is a zeroed dense tensor of type d and shape s.
func alloc(d Dtype, s tensor.Shape) *tensor.Dense {
	return tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(d.Tensor()))
}

// opBase holds the answers every op of this package shares.
type opBase struct{}

func (opBase) ReturnsPtr() bool     { return false }
func (opBase) CallsExtern() bool    { return false }
func (opBase) OverwritesInput() int { return -1 }

// hashString is a Hashcode from an op's String, which names every field
// that changes its result (gorgonia merges nodes of equal hash and inputs).
func hashString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

func writeHash(h hash.Hash, s string) { h.Write([]byte(s)) }

// tensorType is the gorgonia type of a dims-dimensional tensor of of.
func tensorType(dims int, of hm.Type) hm.Type { return gorgonia.TensorType{Dims: dims, Of: of} }

// shapesOf reads the shapes given to InferShape.
func shapesOf(in []gorgonia.DimSizer) []tensor.Shape {
	out := make([]tensor.Shape, len(in))
	for i, d := range in {
		out[i], _ = d.(tensor.Shape)
	}
	return out
}

// valueShapes are the shapes of values.
func valueShapes(in []gorgonia.Value) []tensor.Shape {
	out := make([]tensor.Shape, len(in))
	for i, v := range in {
		out[i] = v.Shape()
	}
	return out
}

// bufShapes are the shapes of buffers.
func bufShapes(in []Buf) []tensor.Shape {
	out := make([]tensor.Shape, len(in))
	for i, b := range in {
		out[i] = b.Shape
	}
	return out
}

// checkBufs fails unless there are n inputs, out and every input are
// storage of their shapes, and the dtypes are the ones given (0: any).
func checkBufs(name string, out Buf, in []Buf, outType Dtype, inTypes ...Dtype) error {
	if len(in) != len(inTypes) {
		return fmt.Errorf("%s: %d inputs, want %d", name, len(in), len(inTypes))
	}
	if !out.Is(out.Dtype) || outType != 0 && out.Dtype != outType {
		return fmt.Errorf("%s: output is %v storage of %d elements for shape %v, want %v", name, out.Dtype, out.Len(), out.Shape, outType)
	}
	for i, b := range in {
		if !b.Is(b.Dtype) || inTypes[i] != 0 && b.Dtype != inTypes[i] {
			return fmt.Errorf("%s: input %d is %v storage of %d elements for shape %v, want %v", name, i, b.Dtype, b.Len(), b.Shape, inTypes[i])
		}
	}
	return nil
}

// floatType is the element type of float values: F32 or F64.
func floatType(name string, vs ...gorgonia.Value) (Dtype, error) {
	var d Dtype
	for _, v := range vs {
		var vd Dtype
		switch v.Dtype() {
		case tensor.Float32:
			vd = F32
		case tensor.Float64:
			vd = F64
		default:
			return 0, fmt.Errorf("%s: dtype %v, want float32 or float64", name, v.Dtype())
		}
		if d != 0 && vd != d {
			return 0, fmt.Errorf("%s: mixed dtypes %v and %v", name, d, vd)
		}
		d = vd
	}
	return d, nil
}
