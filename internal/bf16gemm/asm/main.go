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
	genDot()
	genAMX()
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
func genDot() {
	TEXT("dotTile12x32", NOSPLIT, "func(pairs int, a, b *uint16, c *float32, ldc int, acc bool)")
	Pragma("noescape")
	Doc("dotTile12x32 computes a 12x32 tile of C from packed bf16 pair panels with VDPBF16PS (C = A·B, or C += A·B if acc).")
	n := Load(Param("pairs"), GP64())
	pa := Load(Param("a"), GP64())
	pb := Load(Param("b"), GP64())
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(Imm(2), ldc)
	acc := Load(Param("acc"), GP8())
	zr := []reg.Register{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9,
		reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15, reg.Z16, reg.Z17, reg.Z18, reg.Z19,
		reg.Z20, reg.Z21, reg.Z22, reg.Z23, reg.Z24, reg.Z25, reg.Z26, reg.Z27}
	row := GP64()
	TESTB(acc, acc)
	JZ(LabelRef("dot_zero"))
	MOVQ(pc, row)
	for i := range dotMR {
		VMOVUPS(Mem{Base: row}, zr[2*i])
		VMOVUPS(Mem{Base: row, Disp: 64}, zr[2*i+1])
		if i < dotMR-1 {
			ADDQ(ldc, row)
		}
	}
	JMP(LabelRef("dot_loop_test"))
	Label("dot_zero")
	for i := range 2 * dotMR {
		VPXORD(zr[i], zr[i], zr[i])
	}
	Label("dot_loop_test")
	TESTQ(n, n)
	JZ(LabelRef("dot_store"))
	Label("dot_loop")
	VMOVUPS(Mem{Base: pb}, zr[24])
	VMOVUPS(Mem{Base: pb, Disp: 64}, zr[25])
	for i := range dotMR {
		t := 26 + i%2
		VPBROADCASTD(Mem{Base: pa, Disp: 4 * i}, zr[t])
		for h, bv := range []int{24, 25} {
			d := 2*i + h
			x86enc.Emit(fmt.Sprintf("VDPBF16PS Z%d, Z%d, Z%d", bv, t, d), x86enc.VDPBF16PS(d, t, bv),
				[]Op{zr[d], zr[t], zr[bv]}, []Op{zr[d]})
		}
	}
	ADDQ(U32(4*dotMR), pa)
	ADDQ(U32(4*dotNR), pb)
	DECQ(n)
	JNZ(LabelRef("dot_loop"))
	Label("dot_store")
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
