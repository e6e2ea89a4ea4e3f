// Command asm generates the AVX-512 kernels of package pgemm with avo
// (github.com/mmcloughlin/avo). It lives in its own module so that the main
// module does not depend on avo; `go generate` in internal/pgemm runs it:
//
//	go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg pgemm
//
// Kernel pgemmAVX512m{M}p{P} computes an M×(32·P) tile of C from M rows of
// A read in place and P packed panels of B (each k groups of 32 values,
// panel q at B + q·bstride):
//
//	C[i*ldc+q*32+j] = Σ_p A[i*lda+p] · B[q*bstride+p*32+j]   for i < M, q < P, j < 32
//
// one fused multiply-add per product, p in order, into one float32
// accumulator per element of C (two ZMM vectors per row and panel). P
// panels at once give a row of few accumulators independent chains: the
// kernels of one or two rows take four panels, of three or four rows two.
//
// Kernel rowsAVX512m{M}v{V}[acc] gives each row of A a panel of its own
// (row i reads B + i·bstride) and computes the first 16·V columns of it:
//
//	C[i*ldc+j] = Σ_p A[i*lda+p] · B[i*bstride+p*32+j]   for i < M, j < 16·V
//
// the acc kernels starting each accumulator from C's element instead of
// zero (one FMA chain continued over several calls). Attention's decode
// step is M heads of one query row, each against its own head's keys or
// values: M independent chains where one row against one panel has one.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const (
	nr    = 32 // columns of a panel
	lanes = 16 // float32 lanes of a ZMM vector
	nvec  = nr / lanes
)

func main() {
	ConstraintExpr("amd64,!purego")
	for m := 1; m <= 8; m++ {
		gen(m, 1)
	}
	for m := 1; m <= 4; m++ {
		gen(m, panelsFor(m))
	}
	for m := 1; m <= 8; m++ {
		for v := 1; v <= nvec; v++ {
			genRows(m, v, false)
			genRows(m, v, true)
		}
	}
	Generate()
}

// panelsFor is the panels a kernel of m rows takes at once (beyond 1).
func panelsFor(m int) int {
	if m <= 2 {
		return 4
	}
	return 2
}

func gen(m, P int) {
	name := fmt.Sprintf("pgemmAVX512m%dp%d", m, P)
	TEXT(name, NOSPLIT, "func(k int, a *float32, lda int, b *float32, bstride int, c *float32, ldc int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets C[i*ldc+q*32+j] = Σ_p A[i*lda+p]·B[q*bstride+p*32+j] for i < %d, q < %d, j < 32, p < k (k >= 1).", name, m, P))
	k := Load(Param("k"), GP64())
	pbs := make([]reg.GPVirtual, P)
	pbs[0] = GP64()
	Load(Param("b"), pbs[0])
	if P > 1 {
		bs := Load(Param("bstride"), GP64())
		SHLQ(Imm(2), bs)
		for q := 1; q < P; q++ {
			pbs[q] = GP64()
			LEAQ(Mem{Base: pbs[q-1], Index: bs, Scale: 1}, pbs[q])
		}
	}
	ld := Load(Param("lda"), GP64())
	SHLQ(Imm(2), ld)
	// Rows i = 3q+r live at base[q] + r*lda.
	bases := make([]reg.GPVirtual, (m+2)/3)
	for q := range bases {
		bases[q] = GP64()
		if q == 0 {
			Load(Param("a"), bases[0])
			continue
		}
		LEAQ(Mem{Base: bases[q-1], Index: ld, Scale: 2}, bases[q])
		ADDQ(ld, bases[q])
	}
	aAddr := func(i int) Mem {
		mm := Mem{Base: bases[i/3]}
		if r := i % 3; r > 0 {
			mm.Index, mm.Scale = ld, uint8(r)
		}
		return mm
	}
	w := nvec * P // vectors per row of the tile
	accs := make([][]reg.VecVirtual, m)
	for i := range accs {
		accs[i] = make([]reg.VecVirtual, w)
		for v := range w {
			accs[i][v] = ZMM()
			VPXORD(accs[i][v], accs[i][v], accs[i][v]) // VXORPS on ZMM needs AVX512DQ
		}
	}
	bv := make([]reg.VecVirtual, w)
	for v := range bv {
		bv[v] = ZMM()
	}
	t := ZMM()
	Label("loop")
	for v := range w {
		VMOVUPS(Mem{Base: pbs[v/nvec], Disp: 4 * (v % nvec) * lanes}, bv[v])
	}
	for i := range m {
		VBROADCASTSS(aAddr(i), t)
		for v := range w {
			VFMADD231PS(bv[v], t, accs[i][v])
		}
	}
	for _, b := range bases {
		ADDQ(U32(4), b)
	}
	for _, pb := range pbs {
		ADDQ(U32(4*nr), pb)
	}
	DECQ(k)
	JNZ(LabelRef("loop"))

	storeTile(accs)
}

// storeTile stores the accumulators, row i's vector v at C + i·ldc + 16v,
// and returns.
func storeTile(accs [][]reg.VecVirtual) {
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(Imm(2), ldc)
	for i, row := range accs {
		for v, acc := range row {
			VMOVUPS(acc, Mem{Base: pc, Disp: 4 * v * lanes})
		}
		if i+1 < len(accs) {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
}

// genRows generates rowsAVX512m{m}v{v}[acc]: m rows, each against its own
// panel, v vectors of 16 columns each.
func genRows(m, v int, acc bool) {
	name := fmt.Sprintf("rowsAVX512m%dv%d", m, v)
	how := "="
	if acc {
		name += "acc"
		how = "+="
	}
	TEXT(name, NOSPLIT, "func(k int, a *float32, lda int, b *float32, bstride int, c *float32, ldc int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets C[i*ldc+j] %s Σ_p A[i*lda+p]·B[i*bstride+p*32+j] for i < %d, j < %d, p < k in order (k >= 1).", name, how, m, lanes*v))
	k := Load(Param("k"), GP64())
	// Row i's A at abase[i/3] + (i%3)·lda, its B at bbase[i/3] + (i%3)·bstride.
	bases := func(param string, stride reg.Register) []reg.GPVirtual {
		bs := make([]reg.GPVirtual, (m+2)/3)
		for q := range bs {
			bs[q] = GP64()
			if q == 0 {
				Load(Param(param), bs[0])
				continue
			}
			LEAQ(Mem{Base: bs[q-1], Index: stride, Scale: 2}, bs[q])
			ADDQ(stride, bs[q])
		}
		return bs
	}
	addr := func(bs []reg.GPVirtual, stride reg.Register, i, disp int) Mem {
		mm := Mem{Base: bs[i/3], Disp: disp}
		if r := i % 3; r > 0 {
			mm.Index, mm.Scale = stride, uint8(r)
		}
		return mm
	}
	ld := Load(Param("lda"), GP64())
	SHLQ(Imm(2), ld)
	bst := Load(Param("bstride"), GP64())
	SHLQ(Imm(2), bst)
	ab, bb := bases("a", ld), bases("b", bst)
	accs := make([][]reg.VecVirtual, m)
	var pc, ldc reg.Register
	if acc {
		pc = Load(Param("c"), GP64())
		ldc = Load(Param("ldc"), GP64())
		SHLQ(Imm(2), ldc)
	}
	for i := range accs {
		accs[i] = make([]reg.VecVirtual, v)
		for j := range v {
			accs[i][j] = ZMM()
			if acc {
				VMOVUPS(Mem{Base: pc, Disp: 4 * j * lanes}, accs[i][j])
			} else {
				VPXORD(accs[i][j], accs[i][j], accs[i][j])
			}
		}
		if acc && i+1 < m {
			ADDQ(ldc, pc)
		}
	}
	ts := make([]reg.VecVirtual, m)
	for i := range ts {
		ts[i] = ZMM()
	}
	Label("loop")
	for i := range m {
		VBROADCASTSS(addr(ab, ld, i, 0), ts[i])
		for j := range v {
			VFMADD231PS(addr(bb, bst, i, 4*j*lanes), ts[i], accs[i][j])
		}
	}
	for _, b := range ab {
		ADDQ(U32(4), b)
	}
	for _, b := range bb {
		ADDQ(U32(4*nr), b)
	}
	DECQ(k)
	JNZ(LabelRef("loop"))

	storeTile(accs)
}
