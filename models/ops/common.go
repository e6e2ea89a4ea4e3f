package ops

import (
	"fmt"
	"hash"
	"hash/fnv"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The custom ops of this package follow one pattern: a forward op that is a
// gorgonia SDOp (its SymDiff applies backward ops, so gorgonia.Grad builds
// the backward graph), and backward ops that are plain Ops. Every op
// implements UsePreallocDoer, so an executor that plans memory can bind
// its output, and arena.Kernel, so the arena executor can bind the whole
// computation once and run it without allocating (see kernel.go); Do
// allocates and calls UsePreallocDo. float32 values run the fast kernels,
// float64 values (what the finite-difference tests use) the reference
// loops with math.Exp and math.Erf; both accumulate in float64.

type float interface{ ~float32 | ~float64 }

// hashOf is the Hashcode of an op from its WriteHash. Ops whose hashes are
// equal and whose inputs are the same node are merged by gorgonia, so
// WriteHash must name every field that changes the result.
func hashOf(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// tt is the gorgonia type of a dims-dimensional tensor of a.
func tt(dims int, of hm.Type) hm.Type { return G.TensorType{Dims: dims, Of: of} }

// newLike allocates a zeroed tensor of shape s and v's dtype.
func newLike(v G.Value, s tensor.Shape) *tensor.Dense {
	return tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(v.Dtype()))
}

// scalarOf reads a scalar Value (a gorgonia *F32/*F64 or a one-element
// tensor) as float64.
func scalarOf(op string, v G.Value) (float64, error) {
	switch d := v.Data().(type) {
	case float32:
		return float64(d), nil
	case float64:
		return d, nil
	case []float32:
		if len(d) == 1 {
			return float64(d[0]), nil
		}
	case []float64:
		if len(d) == 1 {
			return d[0], nil
		}
	}
	return 0, fmt.Errorf("%s: want a scalar, got %T of shape %v", op, v, v.Shape())
}

// checkSameDtype fails unless every value has dtype Float32 or Float64 and
// all agree.
func checkSameDtype(op string, vs ...G.Value) error {
	dt := vs[0].Dtype()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		return fmt.Errorf("%s: dtype %v, want float32 or float64", op, dt)
	}
	for _, v := range vs[1:] {
		if v.Dtype() != dt {
			return fmt.Errorf("%s: mixed dtypes %v and %v", op, dt, v.Dtype())
		}
	}
	return nil
}

// checkPrealloc fails unless out is a dense tensor of the given shape and
// dtype.
func checkPrealloc(op string, out G.Value, s tensor.Shape, dt tensor.Dtype) (*tensor.Dense, error) {
	d, ok := out.(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%s: output buffer is %T, want *tensor.Dense", op, out)
	}
	if !d.Shape().Eq(s) || d.Dtype() != dt {
		return nil, fmt.Errorf("%s: output buffer %v %v, want %v %v", op, d.Shape(), d.Dtype(), s, dt)
	}
	return d, nil
}

// opBase holds the answers shared by every op of this package.
type opBase struct{}

func (opBase) ReturnsPtr() bool     { return false }
func (opBase) CallsExtern() bool    { return false }
func (opBase) OverwritesInput() int { return -1 }

func shapeOf(d G.DimSizer) tensor.Shape {
	s, _ := d.(tensor.Shape)
	return s
}
