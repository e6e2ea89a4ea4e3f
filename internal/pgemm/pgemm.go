// Package pgemm is the matrix product of a serving step's linear layers:
// y = x·Wᵀ for a weight W [out, in] that does not change, packed once, and
// a few rows x (a decode step has one per sequence). A general SGEMM
// (internal/sgemm) packs W on every call and computes tiles of 12 rows;
// at one to a few dozen rows that packing and those idle rows dominate.
// Here W is packed once into panels of 32 output columns (Pack) and each
// call runs kernels of up to 8 rows against one or several panels,
// reading x in place (Packed.Mul), so no call packs anything. Rows is the
// product of a decode step's attention: several rows each against a panel
// of its own (one query row of each head against that head's keys), so
// that the heads are independent chains in one call.
//
// The kernels are assembly generated with avo (asm/, its own module; `go
// generate` rewrites kernel_amd64.s) for AVX-512 (a row of a panel is two
// ZMM vectors; kernels of up to 8 rows) and for AVX2+FMA (four YMM
// vectors; kernels of up to 3 rows of a panel, and for Rows up to 7 rows
// of 16 columns or 3 of 32, more rows run as groups of those), chosen at
// run time with golang.org/x/sys/cpu: AVX-512 where the CPU has it, else
// AVX2 with FMA.
// Every kernel computes each element of C as one chain of fused
// multiply-adds over p in order, so both give the same bits, and so does
// the Go emulation of that contract (kernelGo, rowsGo), which the tests
// compare every kernel with. Where neither runs (or under the `purego`
// build tag) Available reports false and callers use their BLAS; Tile and
// Rows then run the emulation. The environment variable GPTLAB_PGEMM=off
// turns the kernels off, for comparisons.
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

// kernelSet holds the kernels by rows (index m-1): of one panel; of
// several panels at once (wide; Mul runs them before the one-panel
// kernels, and a zero panel count means none); and the row-panel kernels
// of Rows by rows, width (index w/16-1: 16 or 32 columns) and whether
// they accumulate into C. A set of assembly may run a kernel of many rows
// as groups of fewer (groupRows): each row's result is its own, so the
// bits are the same.
type kernelSet struct {
	one  [maxRows]kernelFunc
	wide [maxRows]wideKernel
	rows [maxRows][nr / half][2]kernelFunc
}

// wideKernel is a kernel of several panels.
type wideKernel struct {
	panels int
	f      kernelFunc
}

// half is half a panel: Rows computes 16 or 32 columns.
const half = nr / 2

var kernels, kernelName = choose()

// namedSet is a set of kernels and its name, for Kernel.
type namedSet struct {
	name string
	ks   *kernelSet
}

// choose is the fastest set that runs here, unless GPTLAB_PGEMM=off.
func choose() (*kernelSet, string) {
	sets := asmSets()
	if os.Getenv("GPTLAB_PGEMM") == "off" || len(sets) == 0 {
		return nil, ""
	}
	return sets[0].ks, sets[0].name
}

// Available reports whether the kernels run on this machine.
func Available() bool { return kernels != nil }

// Kernel names the kernels in use ("avx512" or "avx2"), or "" when none
// are.
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
		if wk := ks.wide[r-1]; wk.panels > 1 {
			for ; q+wk.panels <= full; q += wk.panels {
				wk.f(in, a, in, &p.panels[q*stride], stride, &y[i*out+q*nr], out)
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

// goKernels emulate the kernels' contract in Go: of one panel, and of
// several for up to four rows (three panels for one row as on AVX2, four
// for two and two for three or four as on AVX-512).
var goKernels = func() (ks kernelSet) {
	for r := range maxRows {
		ks.one[r] = func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
			kernelGo(r+1, 1, k, a, lda, b, bs, c, ldc)
		}
		if P := [maxRows]int{3, 4, 2, 2}[r]; P > 1 {
			ks.wide[r] = wideKernel{P, func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
				kernelGo(r+1, P, k, a, lda, b, bs, c, ldc)
			}}
		}
		for v := range nr / half {
			for acc := range 2 {
				ks.rows[r][v][acc] = func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
					rowsGo(r+1, half*(v+1), acc == 1, k, a, lda, b, bs, c, ldc)
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
	tile(kernels, c, ldc, a, lda, m, k, panel)
}

func tile(ks *kernelSet, c []float32, ldc int, a []float32, lda int, m, k int, panel []float32) {
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
	if k < 1 || (w != half && w != nr) || len(a) < (m-1)*lda+k || len(b) < (m-1)*bstride+(k-1)*nr+w || len(c) < (m-1)*ldc+w {
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
		ks.rows[r-1][w/half-1][ac](k, &a[i*lda], lda, &b[i*bstride], bstride, &c[i*ldc], ldc)
	}
}

// Width is the columns of a panel (32).
const Width = nr
