// Package pgemm is the matrix product of a serving step's linear layers:
// y = x·Wᵀ for a weight W [out, in] that does not change, packed once, and
// a few rows x (a decode step has one per sequence). A general SGEMM
// (internal/sgemm) packs W on every call and computes tiles of 12 rows;
// at one to a few dozen rows that packing and those idle rows dominate.
// Here W is packed once into panels of 32 output columns (Pack) and each
// call runs an M×32 AVX-512 kernel (M = 1 … 8) reading x in place
// (Packed.Mul), so no call packs anything. Rows is the product of a
// decode step's attention: several rows each against a panel of its own
// (one query row of each head against that head's keys), so that the
// heads are independent chains in one call.
//
// The kernels are assembly generated with avo (asm/, its own module; `go
// generate` rewrites kernel_amd64.s), chosen at run time with
// golang.org/x/sys/cpu. Where AVX-512 is missing (or under the `purego`
// build tag) Available reports false and callers use their BLAS; the Go
// emulation of the kernels' contract (kernelGo) is what the tests compare
// the assembly with. The environment variable GPTLAB_PGEMM=off turns the
// kernels off, for comparisons.
//
// It owns no model: callers (models' paged forward) decide which weights
// to pack.
package pgemm

import (
	"fmt"
	"math"
	"os"
	"unsafe"
)

// maxRows is the most rows of x one kernel call computes.
const maxRows = 8

// nr is the width of a panel: output columns per kernel call.
const nr = 32

// kernelFunc sets C[i*ldc+q*32+j] = Σ_p A[i*lda+p]·B[q*bstride+p*32+j]
// for i < its rows, q < its panels, j < 32, p < k, in order, with fused
// multiply-adds.
type kernelFunc func(k int, a *float32, lda int, b *float32, bstride int, c *float32, ldc int)

// kernelSet holds the kernels by rows (index m-1): of one panel, and of
// panelsFor(m) panels for m <= 4 (nil beyond); and the row-panel kernels
// of Rows by rows, vectors (index v-1: 16 or 32 columns) and whether they
// accumulate into C.
type kernelSet struct {
	one, wide [maxRows]kernelFunc
	rows      [maxRows][nr / lanes][2]kernelFunc
}

// lanes is the float32 lanes of one vector: Rows computes 16 or 32 columns.
const lanes = 16

// panelsFor is the panels the wide kernel of m rows computes at once: a
// row of few accumulators needs several panels for independent chains.
func panelsFor(m int) int {
	switch {
	case m <= 2:
		return 4
	case m <= 4:
		return 2
	}
	return 1
}

var kernels, kernelName = choose()

func choose() (*kernelSet, string) {
	if os.Getenv("GPTLAB_PGEMM") == "off" {
		return nil, ""
	}
	return archKernels()
}

// Available reports whether the kernels run on this machine.
func Available() bool { return kernels != nil }

// Kernel names the kernel in use ("avx512"), or "" when none is.
func Kernel() string { return kernelName }

// Packed is W [out, in] packed for y = x·Wᵀ: ceil(out/32) panels, panel q
// holding for each p < in the 32 values W[q*32+j, p] (zero past out).
type Packed struct {
	In, Out int
	panels  []float32
	tile    [maxRows * nr]float32 // the last, partial panel's output
}

// Pack packs w [out, in], row-major.
func Pack(w []float32, out, in int) (*Packed, error) {
	if out < 1 || in < 1 || len(w) != out*in {
		return nil, fmt.Errorf("pgemm: %d weights for [%d, %d]", len(w), out, in)
	}
	np := (out + nr - 1) / nr
	p := &Packed{In: in, Out: out, panels: make([]float32, np*in*nr)}
	for o := range out {
		q, j := o/nr, o%nr
		panel := p.panels[q*in*nr : (q+1)*in*nr]
		for k, v := range w[o*in : (o+1)*in] {
			panel[k*nr+j] = v
		}
	}
	return p, nil
}

// Mul sets y (m, Out) = x (m, In)·Wᵀ with the kernels; it panics when
// they are not Available or the slices are short. It is not safe for
// concurrent use on one Packed.
func (p *Packed) Mul(y, x []float32, m int) { p.mul(kernels, y, x, m) }

func (p *Packed) mul(ks *kernelSet, y, x []float32, m int) {
	if m == 0 {
		return
	}
	if len(x) < m*p.In || len(y) < m*p.Out {
		panic(fmt.Sprintf("pgemm: x of %d and y of %d for %d rows of [%d, %d]", len(x), len(y), m, p.Out, p.In))
	}
	in, out := p.In, p.Out
	stride := in * nr
	full := out / nr // full-width panels
	for i := 0; i < m; i += maxRows {
		r := min(maxRows, m-i)
		a := &x[i*in]
		q := 0
		if P := panelsFor(r); P > 1 {
			for ; q+P <= full; q += P {
				ks.wide[r-1](in, a, in, &p.panels[q*stride], stride, &y[i*out+q*nr], out)
			}
		}
		for ; q < full; q++ {
			ks.one[r-1](in, a, in, &p.panels[q*stride], stride, &y[i*out+q*nr], out)
		}
		if w := out - full*nr; w > 0 {
			ks.one[r-1](in, a, in, &p.panels[full*stride], stride, &p.tile[0], nr)
			for ii := range r {
				copy(y[(i+ii)*out+full*nr:(i+ii)*out+out], p.tile[ii*nr:ii*nr+w])
			}
		}
	}
}

// goKernels emulate the kernels' contract in Go, for every row count and
// panel count the assembly has.
var goKernels = func() (ks kernelSet) {
	for r := range maxRows {
		ks.one[r] = func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
			kernelGo(r+1, 1, k, a, lda, b, bs, c, ldc)
		}
		if P := panelsFor(r + 1); P > 1 {
			ks.wide[r] = func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
				kernelGo(r+1, P, k, a, lda, b, bs, c, ldc)
			}
		}
		for v := range nr / lanes {
			for acc := range 2 {
				ks.rows[r][v][acc] = func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
					rowsGo(r+1, lanes*(v+1), acc == 1, k, a, lda, b, bs, c, ldc)
				}
			}
		}
	}
	return ks
}()

// rowsGo is the row-panel kernels' contract for m rows and w columns:
// C[i*ldc+j] (+)= Σ_p A[i*lda+p]·B[i*bs+p*32+j], an FMA per product, p in
// order, from C's element where acc and from 0 elsewhere.
func rowsGo(m, w int, acc bool, k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
	A := unsafe.Slice(a, (m-1)*lda+k)
	B := unsafe.Slice(b, (m-1)*bs+(k-1)*nr+w)
	C := unsafe.Slice(c, (m-1)*ldc+w)
	for i := range m {
		for j := range w {
			var s float32
			if acc {
				s = C[i*ldc+j]
			}
			for p := range k {
				s = float32(math.FMA(float64(A[i*lda+p]), float64(B[i*bs+p*nr+j]), float64(s)))
			}
			C[i*ldc+j] = s
		}
	}
}

// kernelGo is the kernels' contract for m rows and P panels: an FMA per
// product, p in order.
func kernelGo(m, P, k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
	A := unsafe.Slice(a, (m-1)*lda+k)
	B := unsafe.Slice(b, (P-1)*bs+k*nr)
	C := unsafe.Slice(c, (m-1)*ldc+P*nr)
	for i := range m {
		for q := range P {
			for j := range nr {
				var s float32
				for p := range k {
					s = float32(math.FMA(float64(A[i*lda+p]), float64(B[q*bs+p*nr+j]), float64(s)))
				}
				C[i*ldc+q*nr+j] = s
			}
		}
	}
}

// Tile sets C[i*ldc+j] = Σ_p A[i*lda+p]·panel[p*32+j] for i < m, j < 32,
// p < k: m rows of A (read in place) times one panel of 32 columns (k
// groups of 32 values), e.g. a block of keys laid out as a panel. It runs
// the assembly where Available and the Go emulation elsewhere.
func Tile(c []float32, ldc int, a []float32, lda int, m, k int, panel []float32) {
	if m == 0 {
		return
	}
	if k < 1 || len(panel) < k*nr || len(a) < (m-1)*lda+k || len(c) < (m-1)*ldc+nr {
		panic(fmt.Sprintf("pgemm: tile of %d rows, depth %d: a %d, panel %d, c %d", m, k, len(a), len(panel), len(c)))
	}
	ks := kernels
	if ks == nil {
		ks = &goKernels
	}
	for i := 0; i < m; i += maxRows {
		r := min(maxRows, m-i)
		ks.one[r-1](k, &a[i*lda], lda, &panel[0], 0, &c[i*ldc], ldc)
	}
}

// Rows sets C[i*ldc+j] = Σ_p A[i*lda+p]·b[i*bstride+p*32+j] for i < m,
// j < w, p < k, or with acc adds to C (the FMA chain continued from C's
// element): row i of A against a panel of its own (k groups of 32 values,
// of which the first w are read), e.g. one query row of several heads
// against each head's keys, or several heads' probabilities against each
// head's values. w is 16 or 32. It runs the assembly where Available and
// the Go emulation elsewhere.
func Rows(c []float32, ldc int, a []float32, lda int, b []float32, bstride int, m, k, w int, acc bool) {
	rows(kernels, c, ldc, a, lda, b, bstride, m, k, w, acc)
}

func rows(ks *kernelSet, c []float32, ldc int, a []float32, lda int, b []float32, bstride int, m, k, w int, acc bool) {
	if m == 0 {
		return
	}
	if k < 1 || (w != lanes && w != nr) || len(a) < (m-1)*lda+k || len(b) < (m-1)*bstride+(k-1)*nr+w || len(c) < (m-1)*ldc+w {
		panic(fmt.Sprintf("pgemm: rows of %d rows, depth %d, width %d: a %d, b %d, c %d", m, k, w, len(a), len(b), len(c)))
	}
	if ks == nil {
		ks = &goKernels
	}
	ac := 0
	if acc {
		ac = 1
	}
	for i := 0; i < m; i += maxRows {
		r := min(maxRows, m-i)
		ks.rows[r-1][w/lanes-1][ac](k, &a[i*lda], lda, &b[i*bstride], bstride, &c[i*ldc], ldc)
	}
}

// Width is the columns of a panel (32).
const Width = nr
