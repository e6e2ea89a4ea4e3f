package bf16gemm

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/par"
	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// Gemm computes C = op(A)·op(B) with float32 accumulation, where A and B
// are row-major matrices of bfloat16 bits, op(X) is X or Xᵀ as tA and tB
// say, op(A) is m×k, op(B) is k×n and C (float32, row-major) is m×n; C is
// overwritten. It runs on the path chosen for its shape (calibrated on
// first use, or forced: Path, Mode), splitting large products
// across GOMAXPROCS goroutines (at most maxThreads). It panics on bad
// arguments, naming the one at fault.
func Gemm(tA, tB blas.Transpose, m, n, k int, a []uint16, lda int, b []uint16, ldb int, c []float32, ldc int) {
	o := operands{aT: tA != blas.NoTrans, bT: tB != blas.NoTrans, m: m, n: n, k: k,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if o.trivial(tA, tB, len(a), len(b)) {
		return
	}
	t := threads(m, n, k)
	p := choose(shapeKey{aT: o.aT, bT: o.bT, m: m, n: n, k: k, threads: t})
	if p.kern == nil {
		widen(o)
		return
	}
	run(p.kern, o, t)
}

// GemmF32 is Gemm on operands held as float32 values that are bf16 values
// (each exactly representable: the cast up of a bf16, as the bf16
// policy's graph hands them to its linear layers), with float32 strides.
// On the widen path it multiplies them as they are with internal/sgemm
// (no conversion); on a packed path it converts them to bf16 bits
// (exactly, rounding to nearest even) and multiplies those. A value that
// is not a bf16 would be rounded on the packed paths and not on widen: the
// caller guarantees there is none. The path is chosen per shape as Gemm's
// (Path), calibrated apart from Gemm's: the conversions are its own.
func GemmF32(tA, tB blas.Transpose, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	o := operands{aT: tA != blas.NoTrans, bT: tB != blas.NoTrans, m: m, n: n, k: k, lda: lda, ldb: ldb, c: c, ldc: ldc}
	if o.trivial(tA, tB, len(a), len(b)) {
		return
	}
	t := threads(m, n, k)
	p := choose(shapeKey{f32: true, aT: o.aT, bT: o.bT, m: m, n: n, k: k, threads: t})
	runF32(p, o, a, b, t)
}

// f32Pool holds the bf16 copies of GemmF32's operands on a packed path.
var f32Pool = sync.Pool{New: func() any { return new(encoding) }}

// encoding is GemmF32's operands and their bf16 copies, encoded in
// chunks of encodeChunk values across the product's goroutines.
type encoding struct {
	dst [2][]uint16
	src [2][]float32
}

// encodeChunk is the values a chunk of encoding encodes: a few pages,
// enough for a chunk to cost well over a claim.
const encodeChunk = 16 << 10

// chunks is how many chunks encode operand i (0: A, 1: B).
func (e *encoding) chunks(i int) int { return (len(e.src[i]) + encodeChunk - 1) / encodeChunk }

// RunChunk encodes chunk q: A's chunks first, then B's.
func (e *encoding) RunChunk(q int) {
	i := 0
	if na := e.chunks(0); q >= na {
		i, q = 1, q-na
	}
	lo := q * encodeChunk
	hi := min(len(e.src[i]), lo+encodeChunk)
	precision.EncodeBF16(e.dst[i][lo:hi], e.src[i][lo:hi])
}

// runF32 is GemmF32 on path p: o's a and b are unset, a32 and b32 its
// operands.
func runF32(p pathImpl, o operands, a32, b32 []float32, t int) {
	na, nb := o.storedLen()
	if p.kern == nil {
		tA, tB := blas.NoTrans, blas.NoTrans
		if o.aT {
			tA = blas.Trans
		}
		if o.bT {
			tB = blas.Trans
		}
		sgemm.Implementation{}.Sgemm(tA, tB, o.m, o.n, o.k, 1, a32[:na], o.lda, b32[:nb], o.ldb, 0, o.c, o.ldc)
		return
	}
	e := f32Pool.Get().(*encoding)
	e.dst[0], e.dst[1] = grow(e.dst[0], na), grow(e.dst[1], nb)
	e.src = [2][]float32{a32[:na], b32[:nb]}
	par.Loop(e, e.chunks(0)+e.chunks(1), t) // serial, it took a sixth of a 2-thread dW product
	o.a, o.b = e.dst[0], e.dst[1]
	run(p.kern, o, t)
	e.src = [2][]float32{} // hold no caller's memory in the pool
	f32Pool.Put(e)
}

// storedLen is how many elements of a and b the operands span.
func (o operands) storedLen() (na, nb int) {
	ar, br := o.m, o.k // stored rows
	if o.aT {
		ar = o.k
	}
	if o.bT {
		br = o.n
	}
	return (ar-1)*o.lda + stored(o.aT, o.m, o.k), (br-1)*o.ldb + stored(o.bT, o.k, o.n)
}

// operands is one checked call.
type operands struct {
	aT, bT  bool
	m, n, k int
	a       []uint16
	lda     int
	b       []uint16
	ldb     int
	c       []float32
	ldc     int
}

// trivial checks the call (A and B of na and nb elements) and does it
// if it has no products: C empty, or cleared for a zero depth.
func (o operands) trivial(tA, tB blas.Transpose, na, nb int) bool {
	o.check(tA, tB, na, nb)
	if o.m == 0 || o.n == 0 {
		return true
	}
	if o.k == 0 {
		for i := range o.m {
			clear(o.c[i*o.ldc : i*o.ldc+o.n])
		}
		return true
	}
	return false
}

// check panics unless the arguments describe valid matrices, A and B
// of na and nb elements.
func (o operands) check(tA, tB blas.Transpose, na, nb int) {
	for _, t := range []blas.Transpose{tA, tB} {
		if t != blas.NoTrans && t != blas.Trans && t != blas.ConjTrans {
			panic(fmt.Sprintf("bf16gemm: bad transpose %v", t))
		}
	}
	if o.m < 0 || o.n < 0 || o.k < 0 {
		panic(fmt.Sprintf("bf16gemm: negative dimension m=%d n=%d k=%d", o.m, o.n, o.k))
	}
	ar, ac := o.m, o.k // A's stored shape
	if o.aT {
		ar, ac = o.k, o.m
	}
	br, bc := o.k, o.n
	if o.bT {
		br, bc = o.n, o.k
	}
	for _, x := range []struct {
		name       string
		rows, cols int
		ld, have   int
	}{{"a", ar, ac, o.lda, na}, {"b", br, bc, o.ldb, nb}, {"c", o.m, o.n, o.ldc, len(o.c)}} {
		if x.ld < max(1, x.cols) {
			panic(fmt.Sprintf("bf16gemm: ld%s = %d, want >= %d", x.name, x.ld, max(1, x.cols)))
		}
		if x.rows > 0 && x.cols > 0 && x.have < (x.rows-1)*x.ld+x.cols {
			panic(fmt.Sprintf("bf16gemm: len(%s) = %d, want >= %d", x.name, x.have, (x.rows-1)*x.ld+x.cols))
		}
	}
}

// maxThreads bounds the goroutines of one call.
const maxThreads = 4

// parallelFlops is the size (2·m·n·k) from which a product is split:
// below about 4 MFLOP handing work to another goroutine costs more than it
// saves (internal/sgemm's threshold).
const parallelFlops = 4 << 20

// threads returns how many goroutines an m×n×k product uses.
func threads(m, n, k int) int {
	if 2*int64(m)*int64(n)*int64(k) < parallelFlops {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), maxThreads)
}
