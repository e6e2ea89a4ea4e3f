package ops

import (
	"fmt"
	"hash"
	"sync"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/bf16gemm"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// Gemm16 is op(a)·op(b) of two float32 matrices with both operands
// rounded to bfloat16 and the products summed in float32, on
// internal/bf16gemm (its AMX tiles where it chose them): the linear
// layers' product on the bf16 policy's speed path. Its operands there are
// the cast ups of bf16 values, so the rounding is exact and the result is
// arena.MatMul's on the same operands up to the order of the float32 sums
// (bitwise equal on bf16gemm's widen path, which widens and calls
// internal/sgemm). a is (M, K), or (K, M) with transA; b (K, N), or (N, K)
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
	return op.UsePreallocDo(newLike(in[0], s), in...)
}

func (op gemm16Op) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runFloat32(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op gemm16Op) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// gemm16Scratch holds the bf16 copies of one product's operands, reused
// across calls (a warm call allocates nothing). They live outside the
// planned arena: the speed path's conversion buffers, as large as the
// largest product's operands.
var gemm16Scratch = sync.Pool{New: func() any { return new([2][]uint16) }}

func (op gemm16Op) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 2 {
		return nil, fmt.Errorf("%v: %d inputs, want 2", op, len(in))
	}
	if err := checkF32(op.String(), out, in[0], in[1]); err != nil {
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
	a, b, c := in[0].F32, in[1].F32, out.F32
	lda, ldb := in[0].Shape[1], in[1].Shape[1]
	tA, tB := blas.NoTrans, blas.NoTrans
	if op.transA {
		tA = blas.Trans
	}
	if op.transB {
		tB = blas.Trans
	}
	return func() {
		s := gemm16Scratch.Get().(*[2][]uint16)
		s[0], s[1] = grow16(s[0], len(a)), grow16(s[1], len(b))
		precision.EncodeBF16(s[0], a)
		precision.EncodeBF16(s[1], b)
		bf16gemm.Gemm(tA, tB, m, n, k, s[0], lda, s[1], ldb, c, n)
		gemm16Scratch.Put(s)
	}, nil
}

// grow16 is s with n elements (contents undefined).
func grow16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
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
