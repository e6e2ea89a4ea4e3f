// Package sgemm is a fast float32 matrix multiply (BLAS Sgemm) for the
// default, Go-only build of gptlab.
//
// It follows the BLIS/GotoBLAS structure: B is packed into contiguous,
// zero-padded panels (the packing absorbs Bᵀ), A is read in place by the
// microkernel when it can (rows of A, or columns for Aᵀ) and packed
// otherwise, and a register-blocked microkernel computes MR×NR tiles of C,
// so A·B, A·Bᵀ, Aᵀ·B and Aᵀ·Bᵀ share one kernel family. The microkernels
// are assembly generated with avo (asm/, its own module; `go generate`
// rewrites kernel_amd64.s): AVX-512 (12×32) and AVX2+FMA (6×16), chosen at
// run time with golang.org/x/sys/cpu; a pure-Go 2×4 kernel serves every
// other CPU and the `purego` build tag. Products of at least
// DefaultParallelFlops are split across up to Threads() goroutines. A warm
// call allocates nothing (pack buffers are kept on a free list).
//
// Implementation embeds gonum's Implementation and overrides only Sgemm, so
// it satisfies gorgonia.Use and tensor.Use; Use installs it into both.
// The package does not own the rest of BLAS (every other routine is
// gonum's). Package sgemm/openblas wraps OpenBLAS the same way behind the
// `openblas` build tag, for comparison.
package sgemm

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"

	"gptlab/internal/sgemm/internal/blasarg"
)

// Implementation is gonum's BLAS with Sgemm replaced by this package's.
// The zero value is ready to use and safe for concurrent calls.
type Implementation struct {
	gonum.Implementation
}

var _ gorgonia.BLAS = Implementation{}

// Use installs Implementation as the BLAS of gorgonia and gorgonia/tensor.
func Use() {
	gorgonia.Use(Implementation{})
}

// Kernel names the microkernel Sgemm uses on this machine: "avx512",
// "avx2" or "go".
func Kernel() string {
	return active.Load().name
}

// Sgemm computes C = alpha * op(A) * op(B) + beta * C for row-major
// matrices, where op(X) is X or Xᵀ as tA and tB say, op(A) is m×k, op(B)
// is k×n and C is m×n. It panics on bad arguments exactly as gonum does.
// With beta == 0, C is overwritten (NaNs in C do not propagate).
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	blasarg.Check(tA, tB, m, n, k, lda, ldb, ldc, len(a), len(b), len(c))
	if m == 0 || n == 0 {
		return
	}
	sgemm(active.Load(), tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// PackB writes depth [pc, pc+kb) and columns [jc, jc+nb) of a k×n matrix
// B into dst as the multiply's packed panels of nr columns, the last one
// lastW wide (nr or nr/2): panel q starts at q·kb·nr and holds, depth by
// depth, op(B)[pc+p, jc+q·nr+j] for j < its width, zero past nb. It may
// be called from several goroutines at once, on disjoint blocks.
type PackB func(dst []float32, nr, lastW, pc, jc, kb, nb int)

// SgemmPackedB computes C = A·B for row-major A (m×k, lda) and C (m×n,
// ldc, overwritten), B k×n given by pack, which writes its panels straight
// into the multiply's buffers (a producer of B, e.g. a dequantizer, need
// not write B out for Sgemm to pack it again). If pack writes what B's
// packing would, C is bitwise Sgemm(NoTrans, NoTrans, m, n, k, 1, a, lda,
// B, ldb, 0, c, ldc)'s, on any number of threads.
func SgemmPackedB(m, n, k int, a []float32, lda int, pack PackB, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 || lda < max(1, k) || ldc < max(1, n) || pack == nil {
		panic(fmt.Sprintf("sgemm: SgemmPackedB m %d n %d k %d lda %d ldc %d", m, n, k, lda, ldc))
	}
	if m == 0 || n == 0 {
		return
	}
	if len(a) < (m-1)*lda+k || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("sgemm: SgemmPackedB %d×%d×%d: len(a) %d, len(c) %d", m, n, k, len(a), len(c)))
	}
	if k == 0 {
		blasarg.Scale(0, m, n, c, ldc)
		return
	}
	p := problem{kern: active.Load(), m: m, n: n, k: k, alpha: 1, a: a, lda: lda, c: c, ldc: ldc, pack: pack}
	p.solve()
}

// sgemm computes C = alpha*op(A)*op(B) + beta*C on checked arguments with
// kernel kern, in parallel when the product is large enough.
func sgemm(kern *kernel, aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if alpha == 0 || k == 0 {
		blasarg.Scale(beta, m, n, c, ldc)
		return
	}
	p := problem{kern: kern, aT: aT, bT: bT, m: m, n: n, k: k, alpha: alpha,
		a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	p.solve()
}

// solve computes p, in parallel when the product is large enough.
func (p *problem) solve() {
	if t := threadsFor(p.kern, p.m, p.n, p.k); t > 1 {
		parallel(p, t)
		return
	}
	s := getScratch()
	p.run(s)
	putScratch(s)
}
