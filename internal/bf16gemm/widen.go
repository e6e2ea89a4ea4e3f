package bf16gemm

import (
	"sync"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// widenPool holds the float32 copies of the operands of the widen path.
var widenPool = sync.Pool{New: func() any { return new([2][]float32) }}

// widen computes the product as internal/sgemm does on the operands as
// float32: those held as bf16 bits widened (exactly) into pooled copies,
// those held as float32 as they are, with their own strides; na and nb
// are the elements the operands span.
func widen(o operands, a, b Operand, na, nb int) {
	w := widenPool.Get().(*[2][]float32)
	a32, b32 := a.F32, b.F32
	if a32 == nil {
		w[0] = grow(w[0], na)
		precision.DecodeBF16(w[0], a.U16[:na])
		a32 = w[0]
	}
	if b32 == nil {
		w[1] = grow(w[1], nb)
		precision.DecodeBF16(w[1], b.U16[:nb])
		b32 = w[1]
	}
	tA, tB := blas.NoTrans, blas.NoTrans
	if o.aT {
		tA = blas.Trans
	}
	if o.bT {
		tB = blas.Trans
	}
	sgemm.Implementation{}.Sgemm(tA, tB, o.m, o.n, o.k, 1, a32[:na], o.lda, b32[:nb], o.ldb, 0, o.c, o.ldc)
	widenPool.Put(w)
}

// stored returns the columns of the stored form of an r×c operand (c, or
// r when it is stored transposed).
func stored(t bool, r, c int) int {
	if t {
		return r
	}
	return c
}
