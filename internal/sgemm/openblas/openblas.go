//go:build openblas && cgo

package openblas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import (
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"

	"gptlab/internal/sgemm/internal/blasarg"
)

// Implementation is gonum's BLAS with Sgemm replaced by OpenBLAS's cblas_sgemm
// (cgo; only in builds with the `openblas` tag, linking -lopenblas).
type Implementation struct {
	gonum.Implementation
}

// Use installs Implementation as the BLAS of gorgonia and gorgonia/tensor.
func Use() { gorgonia.Use(Implementation{}) }

// SetThreads sets OpenBLAS's thread count (openblas_set_num_threads).
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// Sgemm computes C = alpha * op(A) * op(B) + beta * C with cblas_sgemm,
// checking its arguments as gonum does.
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	blasarg.Check(tA, tB, m, n, k, lda, ldb, ldc, len(a), len(b), len(c))
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		blasarg.Scale(beta, m, n, c, ldc)
		return
	}
	C.cblas_sgemm(C.CblasRowMajor, cblasTrans(tA), cblasTrans(tB), C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb),
		C.float(beta), (*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}

func cblasTrans(t blas.Transpose) C.enum_CBLAS_TRANSPOSE {
	if t == blas.NoTrans {
		return C.CblasNoTrans
	}
	return C.CblasTrans
}
