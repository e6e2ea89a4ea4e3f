package sgemm

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// kernelFunc computes an mr×w tile of C from an A panel and a packed B
// panel (k groups of w values): C = alpha·A·B when acc is false,
// C += alpha·A·B when it is true; C's rows are ldc elements apart. A packed
// A panel holds k groups of mr values (lda unused); an in-place A panel is
// read from a row-major matrix with lda elements between rows: by rows
// (A(i,p) = a[i*lda+p]) or by columns (A(i,p) = a[p*lda+i], op(A) = Aᵀ).
type kernelFunc func(k int, a *float32, lda int, b, c *float32, ldc int, alpha float32, acc bool)

// strideFunc is a kernelFunc of a full-width (nr) tile whose B is read in
// place, row-major with ldb elements between its rows (B(p,j) =
// b[p*ldb+j]), instead of from a packed panel.
type strideFunc func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool)

// kernel is a microkernel family with its tile shape and cache blocking.
type kernel struct {
	name   string
	mr, nr int // tile of C
	mc, kc int // rows of A and depth handled at once (mc a multiple of mr)
	nc     int // columns of B packed at once (a multiple of nr)

	packed kernelFunc // mr×nr tile, packed A
	rows   kernelFunc // mr×nr tile, A in place by rows; nil: pack A
	cols   kernelFunc // mr×nr tile, A in place by columns; nil: pack A
	// Half-width (mr×nr/2) variants for the last columns, or nil.
	packedHalf, rowsHalf, colsHalf kernelFunc
	// Variants of packed, rows and cols reading a row-major op(B) in place
	// (strideFunc), or nil: B is packed.
	packedS, rowsS, colsS strideFunc
	// packBRows, if not 0, is the rows of C from which a row-major op(B)
	// is packed even so: a packed panel is contiguous and stays in L1
	// while the row panels reuse it, where a panel read in place at a
	// row stride of a multiple of 512 bytes (every width of the GPT's)
	// falls in a few of L1's sets and comes from L2 again for each.
	packBRows int

	// transpose8, if not nil, sets dst[c*dstStride+r] = src[r*ld+c] for
	// r < 8, c < 8*nblk (packing a transposed B).
	transpose8 func(dst, src *float32, ld, dstStride, nblk int)
	// copyRows, if not nil, sets dst[j*panelStride+r*w+c] = src[r*ld+j*w+c]
	// for j < panels, r < rows, c < w (packing a row-major B).
	copyRows func(dst, src *float32, ld, rows, panels, w, panelStride int)

	// fmaLoop, if not nil, runs n trips of fmaFlops floating-point
	// operations of FMAs alone on the kernel's vectors (Peak).
	fmaLoop  func(n int)
	fmaFlops int
}

// goKernel is the portable microkernel.
var goKernel = &kernel{name: "go", mr: 2, nr: 4, mc: 128, kc: 256, nc: 2048, packed: kernelGo}

// kernels lists the microkernels this machine runs, best first; active
// holds the one Sgemm uses.
var (
	kernels = append(archKernels(), goKernel)
	active  atomic.Pointer[kernel]
)

func init() { active.Store(kernels[0]) }

// SetKernel makes Sgemm use the kernel called name ("avx512", "avx2" or
// "go"), for comparisons; it fails if this machine cannot run it.
func SetKernel(name string) error {
	k := kernelByName(name)
	if k == nil {
		return fmt.Errorf("sgemm: kernel %q not available on this machine (have %v)", name, kernelNames())
	}
	active.Store(k)
	return nil
}

// kernelNames lists the kernels this machine runs, best first.
func kernelNames() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}

// kernelByName returns the kernel called name if this machine runs it.
func kernelByName(name string) *kernel {
	for _, k := range kernels {
		if k.name == name {
			return k
		}
	}
	return nil
}

// kernelGo is kernelFunc in plain Go for a 2×4 tile and packed A: eight
// accumulators, two A values and one B value at a time fit the 15 float
// registers the Go ABI leaves, so the loop does not spill; the depth loop
// is unrolled by four (about 1.5x faster than not unrolled).
func kernelGo(k int, a *float32, _ int, b, c *float32, ldc int, alpha float32, acc bool) {
	ap := unsafe.Slice(a, 2*k)
	bp := unsafe.Slice(b, 4*k)
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	for len(ap) >= 8 && len(bp) >= 16 {
		a0, a1 := ap[0], ap[1]
		b := bp[0]
		c00 += a0 * b
		c10 += a1 * b
		b = bp[1]
		c01 += a0 * b
		c11 += a1 * b
		b = bp[2]
		c02 += a0 * b
		c12 += a1 * b
		b = bp[3]
		c03 += a0 * b
		c13 += a1 * b
		a0, a1 = ap[2], ap[3]
		b = bp[4]
		c00 += a0 * b
		c10 += a1 * b
		b = bp[5]
		c01 += a0 * b
		c11 += a1 * b
		b = bp[6]
		c02 += a0 * b
		c12 += a1 * b
		b = bp[7]
		c03 += a0 * b
		c13 += a1 * b
		a0, a1 = ap[4], ap[5]
		b = bp[8]
		c00 += a0 * b
		c10 += a1 * b
		b = bp[9]
		c01 += a0 * b
		c11 += a1 * b
		b = bp[10]
		c02 += a0 * b
		c12 += a1 * b
		b = bp[11]
		c03 += a0 * b
		c13 += a1 * b
		a0, a1 = ap[6], ap[7]
		b = bp[12]
		c00 += a0 * b
		c10 += a1 * b
		b = bp[13]
		c01 += a0 * b
		c11 += a1 * b
		b = bp[14]
		c02 += a0 * b
		c12 += a1 * b
		b = bp[15]
		c03 += a0 * b
		c13 += a1 * b
		ap, bp = ap[8:], bp[16:]
	}
	for len(ap) >= 2 && len(bp) >= 4 {
		a0, a1 := ap[0], ap[1]
		b := bp[0]
		c00 += a0 * b
		c10 += a1 * b
		b = bp[1]
		c01 += a0 * b
		c11 += a1 * b
		b = bp[2]
		c02 += a0 * b
		c12 += a1 * b
		b = bp[3]
		c03 += a0 * b
		c13 += a1 * b
		ap, bp = ap[2:], bp[4:]
	}
	cs := unsafe.Slice(c, ldc+4)
	r0, r1 := cs[0:4:4], cs[ldc:ldc+4:ldc+4]
	if acc {
		r0[0] += alpha * c00
		r0[1] += alpha * c01
		r0[2] += alpha * c02
		r0[3] += alpha * c03
		r1[0] += alpha * c10
		r1[1] += alpha * c11
		r1[2] += alpha * c12
		r1[3] += alpha * c13
		return
	}
	r0[0], r0[1], r0[2], r0[3] = alpha*c00, alpha*c01, alpha*c02, alpha*c03
	r1[0], r1[1], r1[2], r1[3] = alpha*c10, alpha*c11, alpha*c12, alpha*c13
}
