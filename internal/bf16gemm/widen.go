package bf16gemm

import (
	"sync"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// widenPool holds the float32 copies of the operands of the widen path.
var widenPool = sync.Pool{New: func() any { return new([2][]float32) }}

// widen computes the product as internal/sgemm does on the operands
// widened to float32 (exact: every bf16 is a float32), with their own
// strides.
func widen(o operands) {
	w := widenPool.Get().(*[2][]float32)
	na, nb := o.storedLen()
	w[0], w[1] = grow(w[0], na), grow(w[1], nb)
	precision.DecodeBF16(w[0], o.a[:na])
	precision.DecodeBF16(w[1], o.b[:nb])
	tA, tB := blas.NoTrans, blas.NoTrans
	if o.aT {
		tA = blas.Trans
	}
	if o.bT {
		tB = blas.Trans
	}
	sgemm.Implementation{}.Sgemm(tA, tB, o.m, o.n, o.k, 1, w[0], o.lda, w[1], o.ldb, 0, o.c, o.ldc)
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
