// Command asm generates package crc32c's folding kernel with avo
// (github.com/mmcloughlin/avo). It lives in its own module so that the
// main module does not depend on avo; `go generate` in internal/crc32c
// runs it:
//
//	go run -C asm . -out ../fold_amd64.s -stubs ../fold_amd64_stubs.go -pkg crc32c
//
// avo v0.5.0 knows VPCLMULQDQ on XMM registers only; Go's assembler has
// the EVEX forms, so the ZMM multiplies are emitted as raw instructions
// on physical registers.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genFold()
	Generate()
}

// clmul emits VPCLMULQDQ imm, b, a, dst: dst = a.q[imm&1] × b.q[imm>>4&1]
// in each 128-bit lane.
func clmul(imm uint8, b, a, dst reg.Register) {
	Instruction(&ir.Instruction{
		Opcode:   "VPCLMULQDQ",
		Operands: []Op{U8(imm), b, a, dst},
		Inputs:   []Op{b, a},
		Outputs:  []Op{dst},
		ISA:      []string{"AVX512F", "VPCLMULQDQ"},
	})
}

// forward moves every lane of a forward by the distance whose constants
// k holds (h in each lane's low quadword, l in its high one): the two
// products, left in a and t.
func forward(k, a, t reg.Register) {
	clmul(0x00, k, a, t)
	clmul(0x11, k, a, a)
}

func genFold() {
	TEXT("foldAVX512", NOSPLIT, "func(r uint32, p *byte, n int, k *[12]uint64) (lo, hi uint64)")
	Doc("foldAVX512 folds p[:n] (n a multiple of 256, at least 256) from the CRC",
		"register r to a 128-bit remainder, as foldGo does, with the constants k.")
	ptr := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	kp := Load(Param("k"), GP64())
	r := Load(Param("r"), GP32())

	acc := []reg.Register{reg.Z0, reg.Z1, reg.Z2, reg.Z3}
	tmp := []reg.Register{reg.Z4, reg.Z5, reg.Z6, reg.Z7}
	k := reg.Z8
	for i, a := range acc {
		VMOVDQU64(Mem{Base: ptr, Disp: 64 * i}, a)
	}
	VMOVD(r, reg.X9) // zeroes the rest of Z9
	VPXORQ(reg.Z9, reg.Z0, reg.Z0)
	VBROADCASTI32X4(Mem{Base: kp}, k)
	ADDQ(U32(256), ptr)
	SUBQ(U32(256), n)

	Label("fold256")
	TESTQ(n, n)
	JZ(LabelRef("reduce"))
	for i, a := range acc {
		forward(k, a, tmp[i])
	}
	for i, a := range acc {
		VPTERNLOGD(U8(0x96), Mem{Base: ptr, Disp: 64 * i}, tmp[i], a) // a ^= t ^ next
	}
	ADDQ(U32(256), ptr)
	SUBQ(U32(256), n)
	JMP(LabelRef("fold256"))

	Label("reduce")
	Comment("Each register into the next, 64 bytes on.")
	VBROADCASTI32X4(Mem{Base: kp, Disp: 16}, k)
	for i := range 3 {
		forward(k, acc[i], tmp[i])
		VPTERNLOGD(U8(0x96), acc[i], tmp[i], acc[i+1])
	}
	Comment("The last register's lanes into its last lane: 48, 32, 16 bytes on.")
	VMOVDQU64(Mem{Base: kp, Disp: 32}, k)
	x := acc[3]
	VEXTRACTI32X4(U8(3), x, reg.X10) // the last lane, moved by nothing
	forward(k, x, reg.Z4)
	VPXORQ(reg.Z4, x, x)
	VEXTRACTI64X4(U8(1), x, reg.Y4)
	VPXOR(reg.Y4, x.(reg.VecPhysical).AsY(), reg.Y3)
	VEXTRACTI128(U8(1), reg.Y3, reg.X4)
	VPXOR(reg.X4, reg.X3, reg.X3)
	VPXOR(reg.X10, reg.X3, reg.X3)
	lo, hi := GP64(), GP64()
	VMOVQ(reg.X3, lo)
	VPEXTRQ(U8(1), reg.X3, hi)
	VZEROUPPER()
	Store(lo, Return("lo"))
	Store(hi, Return("hi"))
	RET()
}
