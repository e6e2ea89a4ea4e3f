// Command asm generates the AVX2 and AVX-512 SGEMM microkernels of package
// sgemm with avo (github.com/mmcloughlin/avo). It lives in its own module so
// that the main module does not depend on avo; `go generate` in
// internal/sgemm runs it:
//
//	go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg sgemm
//
// Every kernel computes one MR×NR tile of C from a panel of op(A) and a
// packed panel of B (k groups of NR values, row of op(B) after row):
//
//	acc == false: C[i,j] = alpha * Σ_p A(i,p)*B[p*NR+j]
//	acc == true:  C[i,j] += alpha * Σ_p A(i,p)*B[p*NR+j]
//
// with C's rows ldc elements apart. Kernels named ...P read a packed A
// (A(i,p) = a[p*MR+i], lda unused); kernels named ...R read A in place,
// row-major (A(i,p) = a[i*lda+p]); ...C read A in place by columns
// (A(i,p) = a[p*lda+i]). Kernels named ...PS, ...RS and ...CS read B in
// place instead of from a panel, row-major with ldb elements between its
// rows (B(p,j) = b[p*ldb+j]), for full-width panels of a row-major op(B).
// Beta is applied by the caller.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// kernelSpec describes one microkernel.
type kernelSpec struct {
	name   string
	mr     int                   // rows of the tile
	nvec   int                   // vectors per row of the tile
	lanes  int                   // float32 lanes per vector
	vec    func() reg.VecVirtual // allocates a vector register
	unroll int                   // k iterations per main-loop trip
	form   byte                  // A is 'P'acked, or read in place by 'R'ows or 'C'olumns
	// bStride: B is read in place, row-major with ldb elements between
	// its rows (B(p,j) = b[p*ldb+j]), instead of from a packed panel.
	bStride bool
}

func main() {
	ConstraintExpr("amd64,!purego")
	for _, form := range []byte{'P', 'R', 'C'} {
		suffix := string(form)
		gen(kernelSpec{name: "kernelAVX2x16" + suffix, mr: 6, nvec: 2, lanes: 8, vec: YMM, unroll: 4, form: form})
		gen(kernelSpec{name: "kernelAVX2x8" + suffix, mr: 6, nvec: 1, lanes: 8, vec: YMM, unroll: 4, form: form})
		gen(kernelSpec{name: "kernelAVX512x32" + suffix, mr: 12, nvec: 2, lanes: 16, vec: ZMM, unroll: 4, form: form})
		gen(kernelSpec{name: "kernelAVX512x16" + suffix, mr: 12, nvec: 1, lanes: 16, vec: ZMM, unroll: 4, form: form})
	}
	for _, form := range []byte{'P', 'R', 'C'} { // full-width panels with B in place
		suffix := string(form) + "S"
		gen(kernelSpec{name: "kernelAVX2x16" + suffix, mr: 6, nvec: 2, lanes: 8, vec: YMM, unroll: 4, form: form, bStride: true})
		gen(kernelSpec{name: "kernelAVX512x32" + suffix, mr: 12, nvec: 2, lanes: 16, vec: ZMM, unroll: 4, form: form, bStride: true})
	}
	genTranspose()
	genCopyRows()
	genFMAPeak("fmaPeak512", ZMM)
	genFMAPeak("fmaPeak256", YMM)
	Generate()
}

// genTranspose generates transpose8, the packing of a transposed B: it
// writes the 8×8 blocks of an 8-row strip of a row-major matrix transposed,
// so the B panel needs no scalar scatter.
func genTranspose() {
	TEXT("transpose8", NOSPLIT, "func(dst, src *float32, ld, dstStride, nblk int)")
	Pragma("noescape")
	Doc("transpose8 sets dst[c*dstStride+r] = src[r*ld+c] for r < 8, c < 8*nblk.")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	ld := Load(Param("ld"), GP64())
	SHLQ(Imm(2), ld)
	ds := Load(Param("dstStride"), GP64())
	SHLQ(Imm(2), ds)
	n := Load(Param("nblk"), GP64())
	// Rows 3q+r of the strip are at bases[q] + r*ld.
	bases := []reg.Register{src, GP64(), GP64()}
	LEAQ(Mem{Base: src, Index: ld, Scale: 2}, bases[1])
	ADDQ(ld, bases[1])
	LEAQ(Mem{Base: bases[1], Index: ld, Scale: 2}, bases[2])
	ADDQ(ld, bases[2])
	ds3 := GP64()
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, ds3)
	TESTQ(n, n)
	JZ(LabelRef("done"))
	Label("loop")
	r := make([]reg.VecVirtual, 8)
	for i := range r {
		r[i] = YMM()
		m := Mem{Base: bases[i/3]}
		if i%3 > 0 {
			m.Index, m.Scale = ld, uint8(i%3)
		}
		VMOVUPS(m, r[i])
	}
	t := make([]reg.VecVirtual, 8)
	for i := 0; i < 8; i += 2 {
		t[i], t[i+1] = YMM(), YMM()
		VUNPCKLPS(r[i+1], r[i], t[i])
		VUNPCKHPS(r[i+1], r[i], t[i+1])
	}
	sv := make([]reg.VecVirtual, 8)
	for h := 0; h < 2; h++ { // rows 0-3, rows 4-7
		o := 4 * h
		for j := 0; j < 2; j++ { // lo/hi unpack
			a, b := t[o+j], t[o+2+j]
			sv[o+2*j], sv[o+2*j+1] = YMM(), YMM()
			VSHUFPS(Imm(0x44), b, a, sv[o+2*j])
			VSHUFPS(Imm(0xEE), b, a, sv[o+2*j+1])
		}
	}
	// sv[c] (c < 4) holds columns c and c+4 of rows 0-3; sv[4+c] of rows 4-7.
	out := YMM()
	d := GP64()
	MOVQ(dst, d)
	for c := 0; c < 4; c++ {
		VPERM2F128(Imm(0x20), sv[4+c], sv[c], out)
		VMOVUPS(out, colMem(d, ds, ds3, c))
	}
	LEAQ(Mem{Base: dst, Index: ds, Scale: 4}, d)
	for c := 0; c < 4; c++ {
		VPERM2F128(Imm(0x31), sv[4+c], sv[c], out)
		VMOVUPS(out, colMem(d, ds, ds3, c))
	}
	for _, b := range bases {
		ADDQ(Imm(32), b)
	}
	LEAQ(Mem{Base: d, Index: ds, Scale: 4}, dst)
	DECQ(n)
	JNZ(LabelRef("loop"))
	Label("done")
	VZEROUPPER()
	RET()
}

// colMem addresses row c (< 4) of the destination from d with stride ds
// (ds3 = 3*ds).
func colMem(d, ds, ds3 reg.Register, c int) Mem {
	switch c {
	case 0:
		return Mem{Base: d}
	case 3:
		return Mem{Base: d, Index: ds3, Scale: 1}
	}
	return Mem{Base: d, Index: ds, Scale: uint8(c)}
}

func gen(s kernelSpec) {
	nr := s.nvec * s.lanes
	if s.bStride {
		TEXT(s.name, NOSPLIT, "func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool)")
	} else {
		TEXT(s.name, NOSPLIT, "func(k int, a *float32, lda int, b, c *float32, ldc int, alpha float32, acc bool)")
	}
	Pragma("noescape")
	form := map[byte]string{
		'P': "a packed A panel",
		'R': "A read in place, A(i,p) = a[i*lda+p]",
		'C': "A read in place, A(i,p) = a[p*lda+i]",
	}[s.form]
	bForm := "a packed B panel"
	if s.bStride {
		bForm = "B read in place, B(p,j) = b[p*ldb+j]"
	}
	Doc(fmt.Sprintf("%s computes a %dx%d tile of C from %s and %s.", s.name, s.mr, nr, form, bForm))

	k := Load(Param("k"), GP64())
	pb := Load(Param("b"), GP64())
	// bAddr(u, v) addresses vector v of B's row p+u relative to the current
	// p; advanceB moves p on by steps (1 or the unroll).
	bAddr := func(u, v int) Mem { return Mem{Base: pb, Disp: 4 * (u*nr + v*s.lanes)} }
	advanceB := func(steps int) { ADDQ(U32(4*steps*nr), pb) }
	if s.bStride {
		at, advance := rows4(pb, "ldb", s.unroll)
		bAddr = func(u, v int) Mem { return at(u, 4*v*s.lanes) }
		advanceB = advance
	}

	// aAddr(u, i) addresses A(i, p+u) relative to the current p.
	var aAddr func(u, i int) Mem
	var advanceA func(steps int)
	switch s.form {
	case 'C':
		at, advance := rows4(Load(Param("a"), GP64()), "lda", s.unroll)
		aAddr = func(u, i int) Mem { return at(u, 4*i) }
		advanceA = advance
	case 'R':
		// Rows i = 3q+r live at base[q] + r*lda.
		ld := Load(Param("lda"), GP64())
		SHLQ(Imm(2), ld)
		bases := make([]reg.GPVirtual, (s.mr+2)/3)
		for q := range bases {
			bases[q] = GP64()
			if q == 0 {
				Load(Param("a"), bases[0])
				continue
			}
			LEAQ(Mem{Base: bases[q-1], Index: ld, Scale: 2}, bases[q])
			ADDQ(ld, bases[q])
		}
		aAddr = func(u, i int) Mem {
			m := Mem{Base: bases[i/3], Disp: 4 * u}
			if r := i % 3; r > 0 {
				m.Index, m.Scale = ld, uint8(r)
			}
			return m
		}
		advanceA = func(steps int) {
			for _, b := range bases {
				ADDQ(U32(4*steps), b)
			}
		}
	default:
		pa := Load(Param("a"), GP64())
		aAddr = func(u, i int) Mem { return Mem{Base: pa, Disp: 4 * (u*s.mr + i)} }
		advanceA = func(steps int) { ADDQ(U32(4*steps*s.mr), pa) }
	}

	accs := make([][]reg.VecVirtual, s.mr)
	for i := range accs {
		accs[i] = make([]reg.VecVirtual, s.nvec)
		for v := range accs[i] {
			accs[i][v] = s.vec()
			if s.lanes == 16 {
				VPXORD(accs[i][v], accs[i][v], accs[i][v]) // VXORPS on ZMM needs AVX512DQ
			} else {
				VXORPS(accs[i][v], accs[i][v], accs[i][v])
			}
		}
	}
	bv := make([]reg.VecVirtual, s.nvec)
	for v := range bv {
		bv[v] = s.vec()
	}
	t := s.vec()

	step := func(u int) {
		for v := 0; v < s.nvec; v++ {
			VMOVUPS(bAddr(u, v), bv[v])
		}
		for i := 0; i < s.mr; i++ {
			VBROADCASTSS(aAddr(u, i), t)
			for v := 0; v < s.nvec; v++ {
				VFMADD231PS(bv[v], t, accs[i][v])
			}
		}
	}

	n := GP64()
	MOVQ(k, n)
	SHRQ(Imm(uint64(log2(s.unroll))), n)
	JZ(LabelRef("tail"))
	Label("loop")
	for u := 0; u < s.unroll; u++ {
		step(u)
	}
	advanceA(s.unroll)
	advanceB(s.unroll)
	DECQ(n)
	JNZ(LabelRef("loop"))

	Label("tail")
	ANDQ(Imm(uint64(s.unroll-1)), k)
	JZ(LabelRef("store"))
	Label("tailloop")
	step(0)
	advanceA(1)
	advanceB(1)
	DECQ(k)
	JNZ(LabelRef("tailloop"))

	Label("store")
	alpha, _ := Param("alpha").Resolve()
	VBROADCASTSS(alpha.Addr, t)
	for i := range accs {
		for v := range accs[i] {
			VMULPS(t, accs[i][v], accs[i][v])
		}
	}
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(Imm(2), ldc)
	flag := Load(Param("acc"), GP8())
	TESTB(flag, flag)
	JZ(LabelRef("overwrite"))
	for i := 0; i < s.mr; i++ {
		for v := 0; v < s.nvec; v++ {
			m := Mem{Base: pc, Disp: 4 * v * s.lanes}
			VADDPS(m, accs[i][v], accs[i][v])
			VMOVUPS(accs[i][v], m)
		}
		if i+1 < s.mr {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()

	Label("overwrite")
	for i := 0; i < s.mr; i++ {
		for v := 0; v < s.nvec; v++ {
			VMOVUPS(accs[i][v], Mem{Base: pc, Disp: 4 * v * s.lanes})
		}
		if i+1 < s.mr {
			ADDQ(ldc, pc)
		}
	}
	VZEROUPPER()
	RET()
}

// rows4 walks rows p .. p+3 of a row-major matrix from base, with the
// leading dimension (elements) in parameter ld, for a kernel unrolled 4
// times: at(u, disp) addresses row p+u (u < 4) plus disp bytes, from base
// + u*ld for u < 3 and from a second base for u = 3; advance(steps) moves
// p on by 1 (the tail, which reads row p alone) or 4.
func rows4(base reg.Register, ld string, unroll int) (at func(u, disp int) Mem, advance func(steps int)) {
	if unroll != 4 {
		panic("rows4: an unroll of 4 only")
	}
	ldr := Load(Param(ld), GP64())
	SHLQ(Imm(2), ldr)
	base3 := GP64()
	LEAQ(Mem{Base: base, Index: ldr, Scale: 2}, base3)
	ADDQ(ldr, base3)
	ld4 := GP64()
	MOVQ(ldr, ld4)
	SHLQ(Imm(2), ld4)
	at = func(u, disp int) Mem {
		switch u {
		case 0:
			return Mem{Base: base, Disp: disp}
		case 3:
			return Mem{Base: base3, Disp: disp}
		}
		return Mem{Base: base, Index: ldr, Scale: uint8(u), Disp: disp}
	}
	advance = func(steps int) {
		if steps == 1 {
			ADDQ(ldr, base)
			return
		}
		ADDQ(ld4, base)
		ADDQ(ld4, base3)
	}
	return at, advance
}

func log2(x int) int {
	n := 0
	for x > 1 {
		x >>= 1
		n++
	}
	return n
}

// genCopyRows generates copyRows, the packing of a row-major B: a few rows
// of B are copied into every panel, vector by vector.
func genCopyRows() {
	TEXT("copyRows", NOSPLIT, "func(dst, src *float32, ld, rows, panels, w, panelStride int)")
	Pragma("noescape")
	Doc("copyRows sets dst[j*panelStride+r*w+c] = src[r*ld+j*w+c] for j < panels, r < rows, c < w (rows >= 1, w a multiple of 8).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	ld := Load(Param("ld"), GP64())
	SHLQ(Imm(2), ld)
	rows := Load(Param("rows"), GP64())
	panels := Load(Param("panels"), GP64())
	w := Load(Param("w"), GP64())
	SHLQ(Imm(2), w)
	ps := Load(Param("panelStride"), GP64())
	SHLQ(Imm(2), ps)
	s, d, r, v := GP64(), GP64(), GP64(), GP64()
	x := YMM()
	TESTQ(panels, panels)
	JZ(LabelRef("done"))
	Label("panel")
	MOVQ(src, s)
	MOVQ(dst, d)
	MOVQ(rows, r)
	Label("row")
	XORQ(v, v)
	Label("vec")
	VMOVUPS(Mem{Base: s, Index: v, Scale: 1}, x)
	VMOVUPS(x, Mem{Base: d, Index: v, Scale: 1})
	ADDQ(Imm(32), v)
	CMPQ(v, w)
	JB(LabelRef("vec"))
	ADDQ(ld, s)
	ADDQ(w, d)
	DECQ(r)
	JNZ(LabelRef("row"))
	ADDQ(w, src)
	ADDQ(ps, dst)
	DECQ(panels)
	JNZ(LabelRef("panel"))
	Label("done")
	VZEROUPPER()
	RET()
}

// fmaChains is how many independent accumulators the peak loop keeps: more
// than any core's FMA latency times its FMA ports (4 cycles × 2 here),
// so the loop is bound by throughput alone.
const fmaChains = 12

// genFMAPeak generates name(n), n trips of fmaChains independent
// VFMADD231PS on vectors of vec: nothing but FMAs, for the machine's peak.
func genFMAPeak(name string, vec func() reg.VecVirtual) {
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(fmt.Sprintf("%s runs n trips of %d independent FMAs (VFMADD231PS) on registers alone.", name, fmaChains))
	n := Load(Param("n"), GP64())
	x, y := vec(), vec()
	VXORPS(x, x, x)
	VXORPS(y, y, y)
	acc := make([]reg.VecVirtual, fmaChains)
	for i := range acc {
		acc[i] = vec()
		VXORPS(acc[i], acc[i], acc[i])
	}
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	for _, a := range acc {
		VFMADD231PS(x, y, a)
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
