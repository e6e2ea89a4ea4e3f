package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/bf16gemm"
	"gptlab/planner/arena"
)

// Gemm16 is op(a)·op(b) of two float32 matrices holding bfloat16 values,
// the products summed in float32, on internal/bf16gemm (on the path its
// calibration chose for the shape, or GPTLAB_BF16's): the linear layers'
// product on the bf16 policy's speed path. Its operands there are the
// cast ups of bf16 values; the arena runs it on the bf16 values
// themselves where every reader of the cast up can read them so
// (ReadsBF16: the program then makes no float32 copy), with the same
// bits. The result is
// arena.MatMul's on the same operands up to the order of the float32 sums
// (bitwise equal where the shape runs on bf16gemm's widen path, which is
// internal/sgemm on the operands as they are). a is (M, K), or (K, M) with transA; b (K, N), or (N, K)
// with transB; the result (M, N).
func Gemm16(a, b *G.Node, transA, transB bool) (*G.Node, error) {
	return G.ApplyOp(gemm16Op{transA: transA, transB: transB}, a, b)
}

type gemm16Op struct {
	opBase
	transA, transB bool
}

func (gemm16Op) Arity() int { return 2 }
func (gemm16Op) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(2, a), tt(2, a))
}

// InferShape is arena.MatMulOp's, for two matrices.
func (op gemm16Op) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	if a, b := shapeOf(in[0]), shapeOf(in[1]); a.Dims() != 2 || b.Dims() != 2 {
		return nil, fmt.Errorf("%v: shapes %v and %v, want two matrices", op, a, b)
	}
	return arena.MatMulOp{TransA: op.transA, TransB: op.transB}.InferShape(in...)
}

func (op gemm16Op) Do(in ...G.Value) (G.Value, error) {
	s, err := op.InferShape(in[0].Shape(), in[1].Shape())
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(tensor.New(tensor.WithShape(s.Clone()...), tensor.Of(tensor.Float32)), in...) // f32 whichever way a is held
}

func (op gemm16Op) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runReadingBF16(op, op.String(), out, in)
}

// ReadsBF16 implements arena.BF16Reader: either operand may be the bf16
// value itself in place of its cast up (GemmMixed gives the same bits).
func (gemm16Op) ReadsBF16(int) bool { return true }

// BF16Native implements arena.BF16Native: on a packed path the product
// packs the bf16 bits as they are, and would narrow a float32 operand
// again.
func (gemm16Op) BF16Native(int) bool { return true }

// BindKernel implements arena.Kernel.
func (op gemm16Op) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// operand is a buffer as GemmMixed takes it: float32 values or bf16 bits.
func operand(name string, b arena.Buf) (bf16gemm.Operand, error) {
	switch b.Dtype {
	case arena.F32:
		return bf16gemm.Operand{F32: b.F32}, nil
	case arena.BF16:
		return bf16gemm.Operand{U16: b.U16}, nil
	}
	return bf16gemm.Operand{}, fmt.Errorf("%s: operand of %v, want f32 or bf16 storage of shape %v", name, b.Dtype, b.Shape)
}

func (op gemm16Op) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if err := checkF32(op.String(), out); err != nil {
		return nil, err
	}
	a, err := operand(op.String(), in[0])
	if err != nil {
		return nil, err
	}
	b, err := operand(op.String(), in[1])
	if err != nil {
		return nil, err
	}
	s, err := op.InferShape(in[0].Shape, in[1].Shape)
	if err != nil {
		return nil, err
	}
	if !out.Shape.Eq(s) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, s)
	}
	m, n, k := s[0], s[1], in[0].Shape[1]
	if op.transA {
		k = in[0].Shape[0]
	}
	c := out.F32
	lda, ldb := in[0].Shape[1], in[1].Shape[1]
	tA, tB := blas.NoTrans, blas.NoTrans
	if op.transA {
		tA = blas.Trans
	}
	if op.transB {
		tB = blas.Trans
	}
	return func() { bf16gemm.GemmMixed(tA, tB, m, n, k, a, lda, b, ldb, c, n) }, nil
}

func (op gemm16Op) String() string {
	return "Gemm16{" + arena.MatMulOp{TransA: op.transA, TransB: op.transB}.String() + "}"
}
func (op gemm16Op) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op gemm16Op) Hashcode() uint32      { return hashOf(op) }
func (gemm16Op) DiffWRT(int) []bool       { return []bool{true, true} }

// SymDiff: the gradient products of arena.MatMulGrads, on this op (a
// linear layer's gradient products run on the same path as its forward).
func (op gemm16Op) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return arena.MatMulGrads(in[0], in[1], grad, op.transA, op.transB, Gemm16)
}

// Flops is a product's 2·m·n·k (FlopCounter).
func (op gemm16Op) Flops(in []tensor.Shape) float64 {
	a, b := in[0], in[1]
	m, k, n := a[0], a[1], b[1]
	if op.transA {
		m, k = a[1], a[0]
	}
	if op.transB {
		n = b[0]
	}
	return 2 * float64(m) * float64(n) * float64(k)
}
