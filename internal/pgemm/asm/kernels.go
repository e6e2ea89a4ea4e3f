package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// genTile generates pgemm{ISA}m{m}p{P}: m rows of A against P panels.
func genTile(s isa, m, P int) {
	name := fmt.Sprintf("pgemm%sm%dp%d", s.name, m, P)
	w := s.nvec() * P // vectors per row of the tile
	// B's vectors in registers: as many as fit beside the accumulators and
	// the broadcast; the others are the FMAs' memory operands.
	nb := min(w, s.regs-m*w-1)
	if nb < 0 {
		panic(fmt.Sprintf("%s: %d rows of %d vectors do not fit %v", name, m, w, s))
	}
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
	ab := rowBases("a", ld, m)
	accs := make([][]reg.VecVirtual, m)
	for i := range accs {
		accs[i] = make([]reg.VecVirtual, w)
		for v := range w {
			accs[i][v] = s.vec()
			s.zero(accs[i][v])
		}
	}
	bAddr := func(v int) Mem { return Mem{Base: pbs[v/s.nvec()], Disp: 4 * (v % s.nvec()) * s.lanes} }
	bv := make([]Op, w)
	for v := range bv {
		if v < nb {
			bv[v] = s.vec()
		} else {
			bv[v] = bAddr(v)
		}
	}
	t := s.vec()
	Label("loop")
	for v := range nb {
		VMOVUPS(bAddr(v), bv[v])
	}
	for i := range m {
		VBROADCASTSS(rowAddr(ab, ld, i, 0), t)
		for v := range w {
			VFMADD231PS(bv[v], t, accs[i][v])
		}
	}
	for _, b := range ab {
		ADDQ(U32(4), b)
	}
	for _, pb := range pbs {
		ADDQ(U32(4*nr), pb)
	}
	DECQ(k)
	JNZ(LabelRef("loop"))

	storeTile(s, accs)
}

// rowBases loads the base registers of m rows of the matrix param, row i
// at bases[i/3] + (i%3)·stride (an address's index scales by 1 or 2).
func rowBases(param string, stride reg.Register, m int) []reg.GPVirtual {
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

// rowAddr is row i's address from rowBases, plus disp bytes.
func rowAddr(bs []reg.GPVirtual, stride reg.Register, i, disp int) Mem {
	mm := Mem{Base: bs[i/3], Disp: disp}
	if r := i % 3; r > 0 {
		mm.Index, mm.Scale = stride, uint8(r)
	}
	return mm
}

// storeTile stores the accumulators, row i's vector v at C + i·ldc +
// lanes·v, and returns.
func storeTile(s isa, accs [][]reg.VecVirtual) {
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(Imm(2), ldc)
	for i, row := range accs {
		for v, acc := range row {
			VMOVUPS(acc, Mem{Base: pc, Disp: 4 * v * s.lanes})
		}
		if i+1 < len(accs) {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
}

// genRows generates rows{ISA}m{m}v{v}[acc]: m rows, each against its own
// panel, v vectors of the ISA's lanes each, B read by the FMAs.
func genRows(s isa, m, v int, acc bool) {
	name := fmt.Sprintf("rows%sm%dv%d", s.name, m, v)
	how := "="
	if acc {
		name += "acc"
		how = "+="
	}
	// A register per row for its broadcast of A, as many as fit.
	nt := min(m, s.regs-m*v)
	if nt < 1 {
		panic(fmt.Sprintf("%s: %d rows of %d vectors do not fit %v", name, m, v, s))
	}
	TEXT(name, NOSPLIT, "func(k int, a *float32, lda int, b *float32, bstride int, c *float32, ldc int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets C[i*ldc+j] %s Σ_p A[i*lda+p]·B[i*bstride+p*32+j] for i < %d, j < %d, p < k in order (k >= 1).", name, how, m, s.lanes*v))
	k := Load(Param("k"), GP64())
	ld := Load(Param("lda"), GP64())
	SHLQ(Imm(2), ld)
	bst := Load(Param("bstride"), GP64())
	SHLQ(Imm(2), bst)
	ab, bb := rowBases("a", ld, m), rowBases("b", bst, m)
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
			accs[i][j] = s.vec()
			if acc {
				VMOVUPS(Mem{Base: pc, Disp: 4 * j * s.lanes}, accs[i][j])
			} else {
				s.zero(accs[i][j])
			}
		}
		if acc && i+1 < m {
			ADDQ(ldc, pc)
		}
	}
	ts := make([]reg.VecVirtual, nt)
	for i := range ts {
		ts[i] = s.vec()
	}
	Label("loop")
	for i := range m {
		t := ts[i%nt]
		VBROADCASTSS(rowAddr(ab, ld, i, 0), t)
		for j := range v {
			VFMADD231PS(rowAddr(bb, bst, i, 4*j*s.lanes), t, accs[i][j])
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

	storeTile(s, accs)
}
