// Command asm generates the AVX-512 and AVX2+FMA kernels of package pgemm
// with avo (github.com/mmcloughlin/avo). It lives in its own module so
// that the main module does not depend on avo; `go generate` in
// internal/pgemm runs it:
//
//	go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg pgemm
//
// Both instruction sets get the same kernels, with the vector register
// (ZMM of 16 float32 lanes, 32 of them; YMM of 8 lanes, 16 of them) as a
// parameter, so a panel of 32 columns is two ZMM or four YMM vectors.
//
// Kernel pgemm{ISA}m{M}p{P} computes an M×(32·P) tile of C from M rows of
// A read in place and P packed panels of B (each k groups of 32 values,
// panel q at B + q·bstride):
//
//	C[i*ldc+q*32+j] = Σ_p A[i*lda+p] · B[q*bstride+p*32+j]   for i < M, q < P, j < 32
//
// one fused multiply-add per product, p in order, into one float32
// accumulator per element of C. Of B, the vectors that fit beside the
// accumulators are loaded into registers once per p and shared by the
// rows; the rest are the FMAs' memory operands. P panels at once give a
// row of few accumulators independent chains: on AVX-512 the kernels of
// one or two rows take four panels, of three or four rows two; on AVX2,
// where a row of one panel is already four accumulators, one row takes
// three. A kernel has as many rows as fit the registers with one left for
// broadcasting A: eight on AVX-512, three on AVX2 (package pgemm runs
// more rows as groups of these).
//
// Kernel rows{ISA}m{M}v{V}[acc] gives each row of A a panel of its own
// (row i reads B + i·bstride) and computes the first V vectors of it
// (16·V columns on AVX-512, 8·V on AVX2; pgemm uses 16 and 32):
//
//	C[i*ldc+j] = Σ_p A[i*lda+p] · B[i*bstride+p*32+j]   for i < M, j < lanes·V
//
// the acc kernels starting each accumulator from C's element instead of
// zero (one FMA chain continued over several calls). Attention's decode
// step is M heads of one query row, each against its own head's keys or
// values: M independent chains where one row against one panel has one.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/reg"
)

const (
	nr      = 32 // columns of a panel
	maxRows = 8  // most rows of one call of a pgemm kernel
)

// isa is an instruction set the kernels are generated for.
type isa struct {
	name  string // in the kernels' names
	lanes int    // float32 lanes of a vector
	regs  int    // vector registers the kernels may allocate
	vec   func() reg.VecVirtual
	zero  func(v reg.VecVirtual)
}

// nvec is the vectors of one row of a panel.
func (s isa) nvec() int { return nr / s.lanes }

// fit is the most rows (up to maxRows) of perRow accumulators each that
// fit the registers beside one register for broadcasting A.
func (s isa) fit(perRow int) int { return min(maxRows, (s.regs-1)/perRow) }

var (
	avx512 = isa{name: "AVX512", lanes: 16, regs: 32, vec: ZMM,
		zero: func(v reg.VecVirtual) { VPXORD(v, v, v) }} // VXORPS on ZMM needs AVX512DQ
	// avx2 keeps to Y0-Y15: avo's allocator would hand out Y16-Y31 (which
	// only EVEX encodes) past 16 live vectors, so the kernels never have
	// more (pgemm's TestAVX2Registers checks the output).
	avx2 = isa{name: "AVX2", lanes: 8, regs: 16, vec: YMM,
		zero: func(v reg.VecVirtual) { VXORPS(v, v, v) }}
)

func main() {
	ConstraintExpr("amd64,!purego")
	for m := 1; m <= avx512.fit(avx512.nvec()); m++ {
		genTile(avx512, m, 1)
	}
	for m := 1; m <= 4; m++ {
		genTile(avx512, m, panelsAVX512(m))
	}
	for m := 1; m <= maxRows; m++ {
		for v := 1; v <= avx512.nvec(); v++ {
			genRows(avx512, m, v, false)
			genRows(avx512, m, v, true)
		}
	}

	for m := 1; m <= avx2.fit(avx2.nvec()); m++ {
		genTile(avx2, m, 1)
	}
	// One row against as many panels as fit; Rows' 16 and 32 columns.
	genTile(avx2, 1, avx2.fit(avx2.nvec()))
	for _, v := range []int{2, 4} {
		for m := 1; m <= avx2.fit(v); m++ {
			genRows(avx2, m, v, false)
			genRows(avx2, m, v, true)
		}
	}
	Generate()
}

// panelsAVX512 is the panels an AVX-512 kernel of m rows (m <= 4) takes
// at once beyond one.
func panelsAVX512(m int) int {
	if m <= 2 {
		return 4
	}
	return 2
}

// String names the register sizes, for the generator's own errors.
func (s isa) String() string {
	return fmt.Sprintf("%s (%d lanes, %d registers)", s.name, s.lanes, s.regs)
}
