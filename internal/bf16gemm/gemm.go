package bf16gemm

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/par"
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
	GemmMixed(tA, tB, m, n, k, Operand{U16: a}, lda, Operand{U16: b}, ldb, c, ldc)
}

// GemmF32 is Gemm on operands held as float32 values that are bf16 values
// (each exactly representable: the cast up of a bf16), with float32
// strides. On the widen path it multiplies them as they are with
// internal/sgemm (no conversion); on a packed path it converts them to
// bf16 bits (exactly, rounding to nearest even) and multiplies those. A
// value that is not a bf16 would be rounded on the packed paths and not on
// widen: the caller guarantees there is none.
func GemmF32(tA, tB blas.Transpose, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	GemmMixed(tA, tB, m, n, k, Operand{F32: a}, lda, Operand{F32: b}, ldb, c, ldc)
}

// Operand is a matrix operand of GemmMixed: its bf16 values as bits (U16)
// or as float32 (F32, each value a bf16, as GemmF32 takes them). Exactly
// one is set; its stride is the call's.
type Operand struct {
	F32 []float32
	U16 []uint16
}

func (x Operand) len() int {
	if x.U16 != nil {
		return len(x.U16)
	}
	return len(x.F32)
}

// GemmMixed is Gemm with each operand held either way (Operand): the bf16
// policy's products read some operands as the 16-bit values the graph
// stores and others as float32. Gemm, GemmF32 and GemmMixed share each
// shape's path, and on it give the same bits: on widen, internal/sgemm on
// the float32 values (the bf16 operands widened, exactly); on a packed
// path, the kernel on the bf16 bits (the float32 operands converted,
// exactly). So whether a product reads an operand as bits or as its cast
// up never changes its result.
func GemmMixed(tA, tB blas.Transpose, m, n, k int, a Operand, lda int, b Operand, ldb int, c []float32, ldc int) {
	o := operands{aT: tA != blas.NoTrans, bT: tB != blas.NoTrans, m: m, n: n, k: k, lda: lda, ldb: ldb, c: c, ldc: ldc}
	if (a.F32 == nil) == (a.U16 == nil) || (b.F32 == nil) == (b.U16 == nil) {
		if o.m > 0 && o.n > 0 && o.k > 0 {
			panic("bf16gemm: an operand is neither float32 nor bf16 bits, or both")
		}
	}
	if o.trivial(tA, tB, a.len(), b.len()) {
		return
	}
	t := threads(m, n, k)
	p := choose(shapeKey{aT: o.aT, bT: o.bT, m: m, n: n, k: k, threads: t})
	na, nb := o.storedLen()
	if p.kern == nil {
		widen(o, a, b, na, nb)
		return
	}
	if a.U16 != nil && b.U16 != nil {
		o.a, o.b = a.U16, b.U16
		run(p.kern, o, t)
		return
	}
	e := f32Pool.Get().(*encoding)
	e.src = [2][]float32{}
	o.a, o.b = a.U16, b.U16
	if a.F32 != nil {
		e.dst[0], e.src[0] = grow(e.dst[0], na), a.F32[:na]
		o.a = e.dst[0]
	}
	if b.F32 != nil {
		e.dst[1], e.src[1] = grow(e.dst[1], nb), b.F32[:nb]
		o.b = e.dst[1]
	}
	par.Loop(e, e.chunks(0)+e.chunks(1), t)
	run(p.kern, o, t)
	e.src = [2][]float32{} // hold no caller's memory in the pool
	f32Pool.Put(e)
}

// f32Pool holds the bf16 copies of GemmMixed's float32 operands on a
// packed path.
var f32Pool = sync.Pool{New: func() any { return new(encoding) }}

// encoding is GemmMixed's float32 operands and their bf16 copies, encoded
// in chunks of encodeChunk values across the product's goroutines (an
// operand held as bf16 has no source here and no chunks).
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
