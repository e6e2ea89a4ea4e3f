package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
	"gptlab/planner/arena"
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
func (op addBiasOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := checkSameDtype("AddBias", in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc("AddBias", out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	if y, ok := o.Data().([]float64); ok {
		addBias64(y, in[0].Data().([]float64), in[1].Data().([]float64))
		return o, nil
	}
	return runFloat32(op, "AddBias", o, in)
}

// BindKernel implements arena.Kernel.
func (op addBiasOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: y[i] depends on x[i] alone.
func (addBiasOp) InPlaceInputs() []int { return []int{0} }

func (op addBiasOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("AddBias: %d inputs, want 2", len(in))
	}
	if err := checkF32("AddBias", out, in[0], in[1]); err != nil {
		return nil, err
	}
	s, err := op.InferShape(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("AddBias: output %v, want %v", out.Shape, s)
	}
	y, x, b := out.F32, in[0].F32, in[1].F32
	C := len(b)
	return par.New(len(x)/C, C, func(lo, hi int) { // rows of (N, C)
		vec.AddRow(y[lo*C:hi*C], x[lo*C:hi*C], b)
	}).Run, nil
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

// addBias64 is y = x + b per row (y may be x): the float64 reference of
// the kernel.
func addBias64(y, x, b []float64) {
	C := len(b)
	for r := 0; r+C <= len(x); r += C {
		for c, v := range x[r : r+C] {
			y[r+c] = v + b[c]
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
	return op.UsePreallocDo(tensor.New(tensor.WithShape(s[1]), tensor.Of(readDtype(in[0]))), in...)
}

func (op colSumOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("ColSum: %d inputs, want 1", len(in))
	}
	s := in[0].Shape()
	if s.Dims() != 2 {
		return nil, fmt.Errorf("ColSum: shape %v, want (N, C)", s)
	}
	o, err := checkPrealloc("ColSum", out, tensor.Shape{s[1]}, readDtype(in[0]))
	if err != nil {
		return nil, err
	}
	if y, ok := o.Data().([]float64); ok {
		colSum64(y, in[0].Data().([]float64))
		return o, nil
	}
	return runReadingBF16(op, "ColSum", o, in)
}

// ReadsBF16 implements arena.BF16Reader: a bias gradient's column sums
// read the output gradient's bf16 bits as the products beside them do,
// widening each row exactly, with the same sums.
func (colSumOp) ReadsBF16(int) bool { return true }

// BindKernel implements arena.Kernel.
func (op colSumOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op colSumOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("ColSum: %d inputs, want 1", len(in))
	}
	if err := checkF32("ColSum", out); err != nil {
		return nil, err
	}
	if !in[0].Is(arena.F32) && !in[0].Is(arena.BF16) {
		return nil, fmt.Errorf("ColSum: input of %v, want f32 or bf16 storage", in[0].Dtype)
	}
	s, err := op.InferShape(in[0].Shape)
	if err != nil {
		return nil, err
	}
	if out.Shape.TotalSize() != s[0] || out.Shape.Dims() != 1 {
		return nil, fmt.Errorf("ColSum: output %v, want %v", out.Shape, s)
	}
	y, x := out.F32, in[0].F32
	C, N := s[0], in[0].Len()/s[0]
	cb := newColBlocks(C)
	if in[0].Is(arena.BF16) {
		x16 := in[0].U16
		return par.New(cb.n, cb.w*N, func(lo, hi int) {
			for b := lo; b < hi; b++ {
				c0, c1, acc := cb.block(b, C)
				colSumRange16(y, x16, acc, c0, c1)
			}
		}).Run, nil
	}
	return par.New(cb.n, cb.w*N, func(lo, hi int) {
		for b := lo; b < hi; b++ {
			c0, c1, acc := cb.block(b, C)
			colSumRange(y, x, acc, c0, c1)
		}
	}).Run, nil
}

func (colSumOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "ColSum") }
func (op colSumOp) Hashcode() uint32   { return hashOf(op) }
func (colSumOp) String() string        { return "ColSum" }

// colSum64 sums the rows of x into y, rows in order: the float64
// reference of colSumRange.
func colSum64(y, x []float64) {
	C := len(y)
	clear(y)
	for r := 0; r+C <= len(x); r += C {
		for c, v := range x[r : r+C] {
			y[c] += v
		}
	}
}

// colSumRange sums the columns [lo, hi) of x (N, C) into y, accumulating
// in float64 (acc, at least hi-lo long) like a reduction should, rows in
// order.
func colSumRange(y, x []float32, acc []float64, lo, hi int) {
	C := len(y)
	a := acc[:hi-lo]
	clear(a)
	vec.AccumRowsF64(a, x[lo:], len(x)/C, C)
	for c, v := range a {
		y[lo+c] = float32(v)
	}
}

// colSumRange16 is colSumRange on bf16 bits x (N, C): each value widened
// as it is added (vec.AccumRowsBF16F64), so the sums are colSumRange's on
// the cast up, bit for bit, and no float32 copy is made. (Widening 32
// whole rows at a time into scratch and summing them there, before it:
// the baby bf16 step's 33 column sums 0.74-0.79 ms against f32's 0.42.)
func colSumRange16(y []float32, x []uint16, acc []float64, lo, hi int) {
	C := len(y)
	a := acc[:hi-lo]
	clear(a)
	vec.AccumRowsBF16F64(a, x[lo:], len(x)/C, C)
	for c, v := range a {
		y[lo+c] = float32(v)
	}
}

// colBlocks cuts C columns for a split of column sums (ColSum,
// LayerNormGradW): each block sums its columns down every row in order,
// whoever computes it, so the split does not change a bit. A block walks
// the rows of its columns, so a few wide blocks (about one a goroutine, at
// least colBlockMin wide, a multiple of 8 so that a block's vector loops
// run on whole vectors) stream best; each block's float64 sums sit a cache
// line apart from the next block's.
type colBlocks struct {
	w, n int       // columns a block, blocks
	acc  []float64 // block b's sums at b·(w+8)
}

// colBlockMin is the fewest columns of a block (narrower, LayerNormGradW's
// call a row is too short to pay for itself).
const colBlockMin = 64

func newColBlocks(C int) colBlocks {
	w := (max(colBlockMin, (C+par.MaxParts-1)/par.MaxParts) + 7) / 8 * 8
	n := (C + w - 1) / w
	return colBlocks{w: w, n: n, acc: make([]float64, n*(w+8))}
}

// block returns block b's columns [c0, c1) of C and its sums (c1-c0 long).
func (cb colBlocks) block(b, C int) (c0, c1 int, acc []float64) {
	c0, c1 = b*cb.w, min(b*cb.w+cb.w, C)
	return c0, c1, cb.acc[b*(cb.w+8):][:c1-c0]
}
