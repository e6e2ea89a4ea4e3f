package ops

import (
	"fmt"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
	"gptlab/precision"
)

// Every custom op is an arena.Kernel for float32: BindKernel validates the
// shapes once and returns a closure over the bound slices that allocates
// nothing when run. UsePreallocDo on float32 values binds the same kernel
// to the values' storage and runs it once, so the arena executor and the
// TapeMachine compute bitwise the same thing. float64 values (the finite
// difference tests) take the reference loops instead (math.Exp, math.Erf).

// Static checks that every op implements the arena's interfaces.
var (
	_ arena.Kernel   = addBiasOp{}
	_ arena.Kernel   = colSumOp{}
	_ arena.Kernel   = lnOp{}
	_ arena.Kernel   = lnGradXOp{}
	_ arena.Kernel   = lnGradWOp{}
	_ arena.Kernel   = geluOp{}
	_ arena.Kernel   = dropoutOp{}
	_ arena.Kernel   = headsOp{}
	_ arena.Kernel   = causalSoftmaxOp{}
	_ arena.Kernel   = xentOp{}
	_ arena.Kernel   = causalOp{}
	_ arena.Kernel   = causalAttendOp{}
	_ arena.Kernel   = gemm16Op{}
	_ arena.Kernel   = cachedAttnOp{}
	_ arena.Kernel   = runningMeanOp{}
	_ arena.InPlacer = addBiasOp{}
	_ arena.InPlacer = lnOp{}
	_ arena.InPlacer = lnGradXOp{}
	_ arena.InPlacer = geluOp{}
	_ arena.InPlacer = dropoutOp{}
	_ arena.InPlacer = causalSoftmaxOp{}
	_ arena.InPlacer = xentOp{}
)

// binder is the float32 half of an op: check bufs and return the run.
type binder interface {
	bind(out arena.Buf, in []arena.Buf) (func(), error)
}

// checkF32 fails unless every buffer is float32 storage of exactly its
// shape's size.
func checkF32(op string, bufs ...arena.Buf) error {
	for i, b := range bufs {
		if !b.Is(arena.F32) {
			return fmt.Errorf("%s: buffer %d is not float32 storage of shape %v", op, i, b.Shape)
		}
	}
	return nil
}

// shapedOp is an op whose output shape follows from its inputs' shapes.
type shapedOp interface {
	Arity() int
	String() string
	check(in []tensor.Shape) (tensor.Shape, error)
}

// checkBind validates the buffers a float32 kernel is bound to: as many
// inputs as the op takes, float32 storage of the stated shapes, and an
// output of the shape the op computes from its inputs.
func checkBind(op shapedOp, out arena.Buf, in []arena.Buf) error {
	return checkBindOf(op, out, in, false)
}

// checkBindReading16 is checkBind for an op that may read its inputs as
// bf16 bits (arena.BF16Reader): each input float32 or bf16 storage.
func checkBindReading16(op shapedOp, out arena.Buf, in []arena.Buf) error {
	return checkBindOf(op, out, in, true)
}

func checkBindOf(op shapedOp, out arena.Buf, in []arena.Buf, bf16 bool) error {
	if len(in) != op.Arity() {
		return fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	if err := checkF32(op.String(), out); err != nil {
		return err
	}
	want := "float32"
	if bf16 {
		want = "float32 or bf16"
	}
	for i, b := range in {
		if !b.Is(arena.F32) && !(bf16 && b.Is(arena.BF16)) {
			return fmt.Errorf("%s: input %d is not %s storage of shape %v", op, i, want, b.Shape)
		}
	}
	s, err := op.check(shapesOfBufs(in))
	if err != nil {
		return err
	}
	if !out.Shape.Eq(s) {
		return fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	return nil
}

// shapesOfBufs are the shapes of bufs.
func shapesOfBufs(bufs []arena.Buf) []tensor.Shape {
	s := make([]tensor.Shape, len(bufs))
	for i, b := range bufs {
		s[i] = b.Shape
	}
	return s
}

// bufOfValue is the storage of a float32 or int value: a dense tensor, or
// a *G.F32 scalar as a one-element buffer.
func bufOfValue(op string, v G.Value) (arena.Buf, error) {
	if x, ok := v.(*G.F32); ok {
		return arena.Buf{Dtype: arena.F32, F32: unsafe.Slice((*float32)(x), 1), Shape: tensor.ScalarShape()}, nil
	}
	if b, ok := arena.BufOf(v, 0); ok && (b.Dtype == arena.F32 || b.Dtype == arena.Int) {
		return b, nil
	}
	return arena.Buf{}, fmt.Errorf("%s: value %T of dtype %v, want float32 or int storage", op, v, v.Dtype())
}

// runFloat32 binds op's kernel to out and in and runs it once: the
// float32 UsePreallocDo of every op.
func runFloat32(op binder, name string, out G.Value, in []G.Value) (G.Value, error) {
	return runBound(op, name, out, in, false)
}

// runReadingBF16 is runFloat32 for an op that may read inputs as bf16
// bits (arena.BF16Reader): a uint16 input is bf16 storage, as the arena
// hands a fused cast's readers their operand when they run outside it.
func runReadingBF16(op binder, name string, out G.Value, in []G.Value) (G.Value, error) {
	return runBound(op, name, out, in, true)
}

// readDtype is the output type of an op that may read x as bf16 bits
// (arena.BF16Reader): x's, or float32 for bf16 bits.
func readDtype(x G.Value) tensor.Dtype {
	if x.Dtype() == tensor.Uint16 {
		return tensor.Float32
	}
	return x.Dtype()
}

// widened is elements [a, b) of an input held as float32 (x32) or as
// bf16 bits (x16, widened exactly into buf): a kernel reading bf16 runs
// its float32 code on the widened piece, with the same bits.
func widened(x32 []float32, x16 []uint16, a, b int, buf []float32) []float32 {
	if x16 == nil {
		return x32[a:b]
	}
	precision.DecodeBF16(buf[:b-a], x16[a:b])
	return buf[:b-a]
}

// runBound binds op's kernel to the values' storage and runs it once;
// with bf16, uint16 inputs are bf16.
func runBound(op binder, name string, out G.Value, in []G.Value, bf16 bool) (G.Value, error) {
	o, err := bufOfValue(name, out)
	if err != nil {
		return nil, err
	}
	bufs := make([]arena.Buf, len(in))
	for i, v := range in {
		if b, ok := arena.BufOf(v, arena.BF16); bf16 && ok && b.Dtype == arena.BF16 {
			bufs[i] = b
			continue
		}
		if bufs[i], err = bufOfValue(name, v); err != nil {
			return nil, err
		}
	}
	run, err := op.bind(o, bufs)
	if err != nil {
		return nil, err
	}
	run()
	return out, nil
}

// bindKernel adapts bind to arena.Kernel.
func bindKernel(op binder, out arena.Buf, in []arena.Buf) (func(), bool) {
	run, err := op.bind(out, in)
	return run, err == nil
}
