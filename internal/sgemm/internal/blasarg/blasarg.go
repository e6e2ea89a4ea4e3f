// Package blasarg checks Sgemm arguments and scales C exactly as gonum's
// Sgemm does, for the Sgemm implementations of package sgemm and its
// OpenBLAS wrapper.
package blasarg

import "gonum.org/v1/gonum/blas"

// Scale sets C = beta*C, writing zeros when beta == 0.
func Scale(beta float32, m, n int, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// Messages of the panics, the same as gonum's.
const (
	BadTranspose = "blas: illegal transpose"
	MLT0         = "blas: m < 0"
	NLT0         = "blas: n < 0"
	KLT0         = "blas: k < 0"
	BadLdA       = "blas: bad leading dimension of A"
	BadLdB       = "blas: bad leading dimension of B"
	BadLdC       = "blas: bad leading dimension of C"
	ShortA       = "blas: insufficient length of a"
	ShortB       = "blas: insufficient length of b"
	ShortC       = "blas: insufficient length of c"
)

// Check panics as gonum's Sgemm does on invalid arguments.
func Check(tA, tB blas.Transpose, m, n, k, lda, ldb, ldc, la, lb, lc int) {
	if tA != blas.NoTrans && tA != blas.Trans && tA != blas.ConjTrans {
		panic(BadTranspose)
	}
	if tB != blas.NoTrans && tB != blas.Trans && tB != blas.ConjTrans {
		panic(BadTranspose)
	}
	switch {
	case m < 0:
		panic(MLT0)
	case n < 0:
		panic(NLT0)
	case k < 0:
		panic(KLT0)
	}
	aT, bT := tA != blas.NoTrans, tB != blas.NoTrans
	if (aT && lda < max(1, m)) || (!aT && lda < max(1, k)) {
		panic(BadLdA)
	}
	if (bT && ldb < max(1, k)) || (!bT && ldb < max(1, n)) {
		panic(BadLdB)
	}
	if ldc < max(1, n) {
		panic(BadLdC)
	}
	if m == 0 || n == 0 {
		return
	}
	if (aT && la < (k-1)*lda+m) || (!aT && la < (m-1)*lda+k) {
		panic(ShortA)
	}
	if (bT && lb < (n-1)*ldb+k) || (!bT && lb < (k-1)*ldb+n) {
		panic(ShortB)
	}
	if lc < (m-1)*ldc+n {
		panic(ShortC)
	}
}
