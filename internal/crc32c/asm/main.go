// Command asm generates package crc32c's folding kernel with avo
// (github.com/mmcloughlin/avo). It lives in its own module so that the
// main module does not depend on avo; `go generate` in internal/crc32c
// runs it:
//
//	go run -C asm . -out ../fold_amd64.s -stubs ../fold_amd64_stubs.go -pkg crc32c
//
// avo v0.5.0 knows VPCLMULQDQ on XMM registers only; Go's assembler has
// the VEX (YMM) and EVEX (ZMM) forms, so the multiplies are emitted as raw
// instructions, on physical registers throughout.
package main

import (
	"strconv"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genFold(4)
	genFold(2)
	genCPUID()
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
		ISA:      []string{"VPCLMULQDQ"},
	})
}

// forward moves every lane of a forward by the distance whose constants
// k holds (h in each lane's low quadword, l in its high one): the two
// products, left in a and t.
func forward(k, a, t reg.Register) {
	clmul(0x00, k, a, t)
	clmul(0x11, k, a, a)
}

// genFold writes the kernel of four registers of w lanes: foldAVX512 on
// ZMM (w = 4, VPTERNLOGD's three-way XOR) or foldAVX2 on YMM (w = 2, the
// VEX VPCLMULQDQ, two XORs).
func genFold(w int) {
	zmm := w == 4
	name := "foldAVX2"
	acc := []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3}
	tmp := []reg.VecPhysical{reg.Y4, reg.Y5, reg.Y6, reg.Y7}
	k, r9 := reg.VecPhysical(reg.Y8), reg.VecPhysical(reg.Y9)
	if zmm {
		name = "foldAVX512"
		for i := range acc {
			acc[i], tmp[i] = acc[i].AsZ().(reg.VecPhysical), tmp[i].AsZ().(reg.VecPhysical)
		}
		k, r9 = reg.Z8, reg.Z9
	}
	block, regBytes := 64*w, 16*w
	TEXT(name, NOSPLIT, "func(r uint32, p *byte, n int, k *uint64) (lo, hi uint64)")
	Doc(name+" folds p[:n] (n a multiple of "+itoa(block)+", at least "+itoa(block)+") from the CRC",
		"register r to a 128-bit remainder, as foldGo does with "+itoa(w)+" lanes a register,",
		"with the table k (constantsFor("+itoa(w)+")).")
	ptr := Load(Param("p"), GP64())
	n := Load(Param("n"), GP64())
	kp := Load(Param("k"), GP64())
	r := Load(Param("r"), GP32())
	load := func(m Mem, dst reg.Register) {
		if zmm {
			VMOVDQU64(m, dst)
		} else {
			VMOVDQU(m, dst)
		}
	}
	xor := func(a, b, dst reg.Register) { // dst = a ^ b
		if zmm {
			VPXORQ(a, b, dst)
		} else {
			VPXOR(a, b, dst)
		}
	}
	broadcast := func(m Mem, dst reg.Register) {
		if zmm {
			VBROADCASTI32X4(m, dst)
		} else {
			VBROADCASTI128(m, dst)
		}
	}
	for i, a := range acc {
		load(Mem{Base: ptr, Disp: regBytes * i}, a)
	}
	VMOVD(r, reg.X9) // VEX: zeroes the rest of the register
	xor(r9, acc[0], acc[0])
	broadcast(Mem{Base: kp}, k)
	ADDQ(U32(block), ptr)
	SUBQ(U32(block), n)

	loop, reduce := name+"_block", name+"_reduce"
	Label(loop)
	TESTQ(n, n)
	JZ(LabelRef(reduce))
	for i, a := range acc {
		forward(k, a, tmp[i])
	}
	for i, a := range acc {
		m := Mem{Base: ptr, Disp: regBytes * i}
		if zmm {
			VPTERNLOGD(U8(0x96), m, tmp[i], a) // a ^= t ^ next
		} else {
			VPXOR(m, tmp[i], tmp[i])
			VPXOR(tmp[i], a, a)
		}
	}
	ADDQ(U32(block), ptr)
	SUBQ(U32(block), n)
	JMP(LabelRef(loop))

	Label(reduce)
	Comment("Each register into the next, " + itoa(regBytes) + " bytes on.")
	broadcast(Mem{Base: kp, Disp: 16}, k)
	for i := range 3 {
		forward(k, acc[i], tmp[i])
		xor(acc[i], tmp[i], tmp[i])
		xor(tmp[i], acc[i+1], acc[i+1])
	}
	Comment("The last register's lanes into its last lane.")
	load(Mem{Base: kp, Disp: 32}, k)
	x := acc[3]
	if zmm {
		VEXTRACTI32X4(U8(3), x, reg.X10) // the last lane, moved by nothing
	} else {
		VEXTRACTI128(U8(1), x, reg.X10)
	}
	forward(k, x, tmp[0])
	xor(tmp[0], x, x)
	if zmm {
		VEXTRACTI64X4(U8(1), x, reg.Y4)
		VPXOR(reg.Y4, reg.Y3, reg.Y3)
	}
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

// genCPUID writes cpuid7ECX: x/sys/cpu reports VPCLMULQDQ only with
// AVX-512, but AVX2 CPUs have it too (on YMM).
func genCPUID() {
	TEXT("cpuid7ECX", NOSPLIT, "func() uint32")
	Doc("cpuid7ECX is ECX of CPUID leaf 7, subleaf 0 (bit 10: VPCLMULQDQ).")
	MOVL(U32(7), reg.EAX)
	XORL(reg.ECX, reg.ECX)
	CPUID()
	Store(reg.ECX, ReturnIndex(0))
	RET()
}

func itoa(n int) string { return strconv.Itoa(n) }
