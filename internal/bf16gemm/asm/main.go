// Command asm generates the microkernels of package bf16gemm with avo
// (github.com/mmcloughlin/avo). It lives in its own module so that the
// main module does not depend on avo; `go generate` in internal/bf16gemm
// runs it:
//
//	go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg bf16gemm
//
// Go's assembler has no mnemonics for AVX512_BF16 or AMX, so VDPBF16PS and
// the tile instructions are emitted as BYTE directives (encoded by
// gptlab/precision/asm/x86enc, checked there against GNU as) on fixed
// physical registers, each preceded by a comment naming it.
//
// Both kernels compute a tile of C (float32) from packed panels of bf16
// pairs: each dword of a panel holds the values at depths 2p and 2p+1 (the
// even one in the low half).
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"gptlab/precision/asm/x86enc"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genDot(false)
	genDot(true)
	genAMX()
	genPackPairRows()
	genGatherPairs()
	genTransposePairs16()
	genXgetbv()
	Generate()
}

// dotMR and dotNR are the tile of the VDPBF16PS kernel: 12 rows of two
// 16-lane accumulators, 24 of the 32 ZMM registers.
const dotMR, dotNR = 12, 32

// genDot generates dotTile12x32, the AVX512_BF16 kernel:
//
//	C[i,j] (acc: += ; else =) Σ_p over pairs, for i < 12, j < 32,
//
// A packed as pairs of 12 rows (dword p*12+i holds A(i,2p), A(i,2p+1)) and
// B as pairs of 32 columns (dword p*32+j holds B(2p,j), B(2p+1,j)). Per
// pair, each accumulator takes one VDPBF16PS: the odd product, then the
// even one, each a float32 FMA with denormal inputs as zero and denormal
// results flushed (SDM). Registers: accumulators Z0-Z23 (row i in Z2i,
// Z2i+1), B in Z24-Z25, broadcast A in Z26-Z27.
//
// With strided, it generates dotTile12x32s, the same kernel reading A in
// place: A(i, pair p) is the dword at byte offset i*rs + p*ps from a (a
// row-major A whose pairs are adjacent in its rows: rs its row stride in
// bytes, ps 4), the twelve rows through four bases three rows apart.
// The products, their order and C's loads and stores are the packed
// kernel's, so both give the same bits on the same values.
func genDot(strided bool) {
	if strided {
		TEXT("dotTile12x32s", NOSPLIT, "func(pairs int, a *uint16, rs, ps int, b *uint16, c *float32, ldc int, acc bool)")
		Pragma("noescape")
		Doc("dotTile12x32s is dotTile12x32 reading A in place: A(i, pair p) is the dword at byte offset i*rs + p*ps from a.")
	} else {
		TEXT("dotTile12x32", NOSPLIT, "func(pairs int, a, b *uint16, c *float32, ldc int, acc bool)")
		Pragma("noescape")
		Doc("dotTile12x32 computes a 12x32 tile of C from packed bf16 pair panels with VDPBF16PS (C = A·B, or C += A·B if acc).")
	}
	n := Load(Param("pairs"), GP64())
	pa := Load(Param("a"), GP64())
	// aRow is row i's address of the pair: packed, 4i past pa; in place,
	// rs*(i%3) past the base of rows 3(i/3) to 3(i/3)+2.
	var aRow func(i int) Mem
	var bases []reg.Register
	var ps reg.Register
	if strided {
		rs := Load(Param("rs"), GP64())
		ps = Load(Param("ps"), GP64())
		bases = []reg.Register{pa}
		for range 3 {
			b := GP64()
			LEAQ(Mem{Base: bases[len(bases)-1], Index: rs, Scale: 2}, b)
			ADDQ(rs, b) // three rows past the last base
			bases = append(bases, b)
		}
		aRow = func(i int) Mem {
			m := Mem{Base: bases[i/3]}
			if i%3 > 0 {
				m.Index, m.Scale = rs, uint8(i%3)
			}
			return m
		}
	} else {
		aRow = func(i int) Mem { return Mem{Base: pa, Disp: 4 * i} }
	}
	pb := Load(Param("b"), GP64())
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(Imm(2), ldc)
	acc := Load(Param("acc"), GP8())
	zr := []reg.Register{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9,
		reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19,
		reg.Z20, reg.Z21, reg.Z22, reg.Z23, reg.Z24, reg.Z25, reg.Z26, reg.Z27}
	l := func(name string) string {
		if strided {
			return "dots_" + name
		}
		return "dot_" + name
	}
	row := GP64()
	TESTB(acc, acc)
	JZ(LabelRef(l("zero")))
	MOVQ(pc, row)
	for i := range dotMR {
		VMOVUPS(Mem{Base: row}, zr[2*i])
		VMOVUPS(Mem{Base: row, Disp: 64}, zr[2*i+1])
		if i < dotMR-1 {
			ADDQ(ldc, row)
		}
	}
	JMP(LabelRef(l("loop_test")))
	Label(l("zero"))
	for i := range 2 * dotMR {
		VPXORD(zr[i], zr[i], zr[i])
	}
	Label(l("loop_test"))
	TESTQ(n, n)
	JZ(LabelRef(l("store")))
	Label(l("loop"))
	VMOVUPS(Mem{Base: pb}, zr[24])
	VMOVUPS(Mem{Base: pb, Disp: 64}, zr[25])
	for i := range dotMR {
		t := 26 + i%2
		VPBROADCASTD(aRow(i), zr[t])
		for h, bv := range []int{24, 25} {
			d := 2*i + h
			x86enc.Emit(fmt.Sprintf("VDPBF16PS Z%d, Z%d, Z%d", bv, t, d), x86enc.VDPBF16PS(d, t, bv),
				[]Op{zr[d], zr[t], zr[bv]}, []Op{zr[d]})
		}
	}
	if strided {
		for _, b := range bases {
			ADDQ(ps, b)
		}
	} else {
		ADDQ(U32(4*dotMR), pa)
	}
	ADDQ(U32(4*dotNR), pb)
	DECQ(n)
	JNZ(LabelRef(l("loop")))
	Label(l("store"))
	MOVQ(pc, row)
	for i := range dotMR {
		VMOVUPS(zr[2*i], Mem{Base: row})
		VMOVUPS(zr[2*i+1], Mem{Base: row, Disp: 64})
		if i < dotMR-1 {
			ADDQ(ldc, row)
		}
	}
	VZEROUPPER()
	RET()
}

// Register numbers for the AMX kernel's memory operands (the bytes name
// them, so they are physical).
const (
	nAX, nCX, nDX, nBX, nSI, nDI = 0, 1, 2, 3, 6, 7
	nR8, nR9, nR10, nR11, nR12   = 8, 9, 10, 11, 12
)

// genAMX generates amxStrip32x32, the AMX-BF16 kernel: a strip of
// panels 32x32 tiles of C side by side (columns 0-31, 32-63, ...), each as
// four 16x16 float32 tiles (tmm0: rows 0-15, columns 0-15; tmm1: rows
// 0-15, columns 16-31; tmm2, tmm3: rows 16-31), over depth blocks of 32
// (16 pairs): A tiles tmm4 (rows 0-15) and tmm5 (rows 16-31), 16 rows of 16
// pairs read from a row-major A panel (lda elements between rows), the
// same A panel for every tile of the strip; B tiles tmm6 (columns 0-15)
// and tmm7 (16-31), 16 pair rows of 16 columns read from a pair panel of
// 32 columns (128 bytes between pair rows), the strip's next tile reading
// the panel bstride elements further. The tile configuration (palette 1,
// all eight tiles 16 rows of 64 bytes) is the caller's, at cfg, loaded
// once for the strip (LDTILECFG and TILERELEASE cost about as much as a
// tile's products at the step's depths); the tiles are released before
// returning: no tile state outlives the call, so a goroutine that moves to
// another thread between calls finds nothing missing.
func genAMX() {
	TEXT("amxStrip32x32", NOSPLIT, "func(cfg *byte, pairs int, a *uint16, lda int, b *uint16, bstride int, c *float32, ldc int, panels int, acc bool)")
	Pragma("noescape")
	Doc("amxStrip32x32 computes panels 32x32 tiles of C side by side from one A panel and consecutive B panels (bstride elements apart) with TDPBF16PS (C = A·B, or C += A·B if acc); pairs is a multiple of 16, panels at least 1.")
	Load(Param("cfg"), reg.RDI)
	x86enc.Emit("LDTILECFG (DI)", x86enc.LDTILECFG(nDI), []Op{reg.RDI}, nil)
	Load(Param("c"), reg.R8)
	Load(Param("ldc"), reg.R9)
	SHLQ(Imm(2), reg.R9) // bytes between rows of C
	Load(Param("lda"), reg.RDX)
	SHLQ(Imm(1), reg.RDX) // bytes between rows of A
	Load(Param("b"), reg.R14)
	Load(Param("panels"), reg.R13)
	Label("amx_panel")
	MOVQ(reg.R9, reg.R10)
	SHLQ(Imm(4), reg.R10)
	ADDQ(reg.R8, reg.R10) // C's row 16 of this tile
	// cTiles emits f(tile, base in DI) for the four C tiles.
	cTiles := func(f func(t int)) {
		for t, base := range []reg.Register{reg.R8, reg.R8, reg.R10, reg.R10} {
			MOVQ(base, reg.RDI)
			if t%2 == 1 {
				ADDQ(Imm(64), reg.RDI)
			}
			f(t)
		}
	}
	Load(Param("acc"), reg.AL)
	TESTB(reg.AL, reg.AL)
	JZ(LabelRef("amx_zero"))
	cTiles(func(t int) {
		x86enc.Emit(fmt.Sprintf("TILELOADD (DI)(R9*1), TMM%d", t), x86enc.TILELOADD(t, nDI, nR9), []Op{reg.RDI, reg.R9}, nil)
	})
	JMP(LabelRef("amx_body"))
	Label("amx_zero")
	for t := range 4 {
		x86enc.Emit(fmt.Sprintf("TILEZERO TMM%d", t), x86enc.TILEZERO(t), nil, nil)
	}
	Label("amx_body")
	Load(Param("a"), reg.RSI)
	MOVQ(reg.RDX, reg.R11)
	SHLQ(Imm(4), reg.R11)
	ADDQ(reg.RSI, reg.R11) // A's row 16
	MOVQ(reg.R14, reg.RCX)
	LEAQ(Mem{Base: reg.R14, Disp: 64}, reg.RBX) // B's column 16
	MOVQ(U32(128), reg.RAX)                     // bytes between pair rows of B
	Load(Param("pairs"), reg.R12)
	SHRQ(Imm(4), reg.R12)
	TESTQ(reg.R12, reg.R12)
	JZ(LabelRef("amx_store"))
	Label("amx_loop")
	for _, l := range []struct {
		t, base, stride int
		b, s            reg.Register
	}{{4, nSI, nDX, reg.RSI, reg.RDX}, {5, nR11, nDX, reg.R11, reg.RDX}, {6, nCX, nAX, reg.RCX, reg.RAX}, {7, nBX, nAX, reg.RBX, reg.RAX}} {
		x86enc.Emit(fmt.Sprintf("TILELOADD (%v)(%v*1), TMM%d", l.b.Asm(), l.s.Asm(), l.t), x86enc.TILELOADD(l.t, l.base, l.stride), []Op{l.b, l.s}, nil)
	}
	for _, d := range []struct{ c, a, b int }{{0, 4, 6}, {1, 4, 7}, {2, 5, 6}, {3, 5, 7}} {
		x86enc.Emit(fmt.Sprintf("TDPBF16PS TMM%d, TMM%d, TMM%d (tmm%d += tmm%d·tmm%d)", d.b, d.a, d.c, d.c, d.a, d.b), x86enc.TDPBF16PS(d.c, d.a, d.b), nil, nil)
	}
	ADDQ(Imm(64), reg.RSI)
	ADDQ(Imm(64), reg.R11)
	ADDQ(U32(16*128), reg.RCX)
	ADDQ(U32(16*128), reg.RBX)
	DECQ(reg.R12)
	JNZ(LabelRef("amx_loop"))
	Label("amx_store")
	cTiles(func(t int) {
		x86enc.Emit(fmt.Sprintf("TILESTORED TMM%d, (DI)(R9*1)", t), x86enc.TILESTORED(t, nDI, nR9), []Op{reg.RDI, reg.R9}, nil)
	})
	ADDQ(Imm(128), reg.R8) // the next tile's columns
	Load(Param("bstride"), reg.RDI)
	SHLQ(Imm(1), reg.RDI)
	ADDQ(reg.RDI, reg.R14) // the next B panel
	DECQ(reg.R13)
	JNZ(LabelRef("amx_panel"))
	x86enc.Emit("TILERELEASE", x86enc.TILERELEASE(), nil, nil)
	RET()
}

// genPackPairRows generates packPairRows, the packing of a pair panel
// whose pairs span two stored rows (op(A) transposed, op(B) untransposed):
//
//	dst[p*w+j] (dwords) = src[2p*ld+j] | src[(2p+1)*ld+j]<<16
//
// for p < pairs and the columns j < 32 whose bit is set in mask (the
// others of dst's w are not written; w is 12 or 32). The two rows are
// loaded under the mask (no read past the columns) and interleaved by
// VPERMT2W with idx's two tables of 32 words (the first interleaves
// columns 0-15, the second 16-31).
func genPackPairRows() {
	TEXT("packPairRows", NOSPLIT, "func(pairs int, src *uint16, ld int, dst *uint16, w int, mask uint32, idx *uint16)")
	Pragma("noescape")
	Doc("packPairRows interleaves pairs pairs of stored rows (ld elements apart) into dwords of a pair panel w dwords wide, the columns of mask (AVX512BW).")
	n := Load(Param("pairs"), GP64())
	s := Load(Param("src"), GP64())
	ld := Load(Param("ld"), GP64())
	SHLQ(Imm(1), ld) // bytes between stored rows
	d := Load(Param("dst"), GP64())
	w := Load(Param("w"), GP64())
	SHLQ(Imm(2), w) // bytes between pair rows of dst
	m := Load(Param("mask"), GP32())
	idx := Load(Param("idx"), GP64())
	VMOVDQU16(Mem{Base: idx}, reg.Z30)
	VMOVDQU16(Mem{Base: idx, Disp: 64}, reg.Z31)
	KMOVD(m, reg.K1) // the columns read
	KMOVW(m, reg.K2) // the dwords of columns 0-15 written
	SHRL(Imm(16), m)
	KMOVW(m, reg.K3) // and of columns 16-31
	hi := GP64()
	LEAQ(Mem{Base: s, Index: ld, Scale: 1}, hi)
	SHLQ(Imm(1), ld) // bytes between pairs of stored rows
	TESTQ(n, n)
	JZ(LabelRef("ppr_done"))
	Label("ppr_loop")
	VMOVDQU16_Z(Mem{Base: s}, reg.K1, reg.Z0)
	VMOVDQU16_Z(Mem{Base: hi}, reg.K1, reg.Z1)
	VMOVDQA64(reg.Z0, reg.Z2)
	VPERMT2W(reg.Z1, reg.Z30, reg.Z2)
	VPERMT2W(reg.Z1, reg.Z31, reg.Z0)
	VMOVDQU32(reg.Z2, reg.K2, Mem{Base: d})
	VMOVDQU32(reg.Z0, reg.K3, Mem{Base: d, Disp: 64})
	ADDQ(ld, s)
	ADDQ(ld, hi)
	ADDQ(w, d)
	DECQ(n)
	JNZ(LabelRef("ppr_loop"))
	Label("ppr_done")
	VZEROUPPER()
	RET()
}

// genGatherPairs generates gatherPairs, the packing of a pair panel
// whose pairs are adjacent in the stored rows (op(A) untransposed, op(B)
// transposed): a transpose of dwords,
//
//	dst[p*w+r] (dwords) = the pair at src[offs[r]+2p], src[offs[r]+2p+1]
//
// for p < pairs and the rows r < 16 whose bit is set in mask (the others
// are neither read nor written), one VPGATHERDD a pair row.
func genGatherPairs() {
	TEXT("gatherPairs", NOSPLIT, "func(pairs int, src *uint16, dst *uint16, w int, mask uint16, offs *int32)")
	Pragma("noescape")
	Doc("gatherPairs gathers pairs pairs of up to 16 stored rows (at element offsets offs from src, the rows of mask) into dwords of a pair panel w dwords wide (AVX512F).")
	n := Load(Param("pairs"), GP64())
	s := Load(Param("src"), GP64())
	d := Load(Param("dst"), GP64())
	w := Load(Param("w"), GP64())
	SHLQ(Imm(2), w)
	m := Load(Param("mask"), GP32())
	offs := Load(Param("offs"), GP64())
	VMOVDQU32(Mem{Base: offs}, reg.Z0)
	KMOVW(m, reg.K2)
	TESTQ(n, n)
	JZ(LabelRef("gp_done"))
	Label("gp_loop")
	KMOVW(m, reg.K1)
	VPXORD(reg.Z1, reg.Z1, reg.Z1)
	VPGATHERDD(Mem{Base: s, Index: reg.Z0, Scale: 2}, reg.K1, reg.Z1)
	VMOVDQU32(reg.Z1, reg.K2, Mem{Base: d})
	ADDQ(Imm(4), s)
	ADDQ(w, d)
	DECQ(n)
	JNZ(LabelRef("gp_loop"))
	Label("gp_done")
	VZEROUPPER()
	RET()
}

// genTransposePairs16 generates transposePairs16, transposePairs's
// contract (pack.go) for blocks of 16 pairs of up to 16 stored rows: each
// block loads 16 dwords of each row (rows past the last one load the last
// again: offs clamps them), transposes the 16x16 dwords in registers
// (unpacks of dwords and qwords, then two rounds of 128-bit lane
// shuffles) and stores each pair row's dwords under mask. VPGATHERDD,
// the one-instruction way, takes about 30 cycles a pair row on Zen 4;
// this takes about five.
func genTransposePairs16() {
	TEXT("transposePairs16", NOSPLIT, "func(blocks int, src *uint16, offs *int64, dst *uint16, w int, mask uint16)")
	Pragma("noescape")
	Doc("transposePairs16 transposes blocks blocks of 16 pairs of 16 stored rows (at byte offsets offs from src) into dwords of a pair panel w dwords wide, the rows of mask written (AVX512F).")
	n := Load(Param("blocks"), GP64())
	s := Load(Param("src"), GP64())
	offs := Load(Param("offs"), GP64())
	d := Load(Param("dst"), GP64())
	w := Load(Param("w"), GP64())
	SHLQ(Imm(2), w) // bytes between pair rows of dst
	m := Load(Param("mask"), GP32())
	KMOVW(m, reg.K2)
	z := func(i int) reg.VecPhysical {
		return []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
			reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17,
			reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23, reg.Z24, reg.Z25, reg.Z26, reg.Z27,
			reg.Z28, reg.Z29, reg.Z30, reg.Z31}[i]
	}
	off := GP64()
	d2 := GP64()
	TESTQ(n, n)
	JZ(LabelRef("tp_done"))
	Label("tp_loop")
	// Rows r in Z(r).
	for r := range 16 {
		MOVQ(Mem{Base: offs, Disp: 8 * r}, off)
		VMOVDQU32(Mem{Base: s, Index: off, Scale: 1}, z(r))
	}
	// t(2g), t(2g+1) in Z16+: rows 2g and 2g+1 interleaved by dwords.
	for g := range 8 {
		VPUNPCKLDQ(z(2*g+1), z(2*g), z(16+2*g))
		VPUNPCKHDQ(z(2*g+1), z(2*g), z(16+2*g+1))
	}
	// u(4q+c) in Z(4q+c): rows 4q..4q+3 of column 4L+c in lane L.
	for q := range 4 {
		t := 16 + 4*q
		VPUNPCKLQDQ(z(t+2), z(t), z(4*q))
		VPUNPCKHQDQ(z(t+2), z(t), z(4*q+1))
		VPUNPCKLQDQ(z(t+3), z(t+1), z(4*q+2))
		VPUNPCKHQDQ(z(t+3), z(t+1), z(4*q+3))
	}
	// v in Z16+: v(8h+c) lanes 0,2 columns c, c+8 (0x88) and v(8h+4+c)
	// columns c+4, c+12 (0xdd), rows 8h..8h+7.
	for h := range 2 {
		for c := range 4 {
			VSHUFI32X4(U8(0x88), z(8*h+4+c), z(8*h+c), z(16+8*h+c))
			VSHUFI32X4(U8(0xdd), z(8*h+4+c), z(8*h+c), z(16+8*h+4+c))
		}
	}
	// Columns: 0x88 of v(c), v(8+c) is column cl, 0xdd column cl+8,
	// where v(c) holds columns cl, cl+8 (cl = c for c < 4, c for the
	// 0xdd half: v(4+c) holds c+4, c+12).
	for c := range 8 {
		VSHUFI32X4(U8(0x88), z(16+8+c), z(16+c), z(c))
		VSHUFI32X4(U8(0xdd), z(16+8+c), z(16+c), z(8+c))
	}
	MOVQ(d, d2)
	for c := range 16 {
		VMOVDQU32(z(c), reg.K2, Mem{Base: d2})
		if c < 15 {
			ADDQ(w, d2)
		}
	}
	ADDQ(w, d2)
	MOVQ(d2, d)
	ADDQ(Imm(64), s)
	DECQ(n)
	JNZ(LabelRef("tp_loop"))
	Label("tp_done")
	VZEROUPPER()
	RET()
}

// genXgetbv generates xgetbv0, which returns XCR0 (the state components
// the OS enables): AMX needs bits 17 and 18 (XTILECFG, XTILEDATA).
func genXgetbv() {
	TEXT("xgetbv0", NOSPLIT, "func() uint64")
	Doc("xgetbv0 returns XCR0.")
	XORL(reg.ECX, reg.ECX)
	XGETBV()
	SHLQ(Imm(32), reg.RDX)
	ORQ(reg.RDX, reg.RAX)
	Store(reg.RAX, ReturnIndex(0))
	RET()
}
