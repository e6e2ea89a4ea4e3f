// Package x86enc encodes the few x86 instructions that Go's assembler (and
// so avo) has no mnemonics for, as bytes for BYTE directives: AVX512_BF16's
// VCVTNEPS2BF16 and VDPBF16PS (register forms) and AMX's tile
// instructions. The encodings follow the Intel SDM (vol. 2, 2.3 VEX and
// 2.7 EVEX); x86enc_test.go checks them against GNU as.
package x86enc

// Opcode maps (the m-mmmm / mm field).
const (
	Map0F   = 1
	Map0F38 = 2
	Map0F3A = 3
)

// Mandatory prefixes (the pp field).
const (
	PPNone = 0
	PP66   = 1
	PPF3   = 2
	PPF2   = 3
)

// Vector lengths (EVEX.L'L).
const (
	L128 = 0
	L256 = 1
	L512 = 2
)

// bit returns 1 if bit k of r is set.
func bit(r, k int) byte { return byte(r>>k) & 1 }

// EVEXRR encodes an EVEX instruction whose operands are all registers:
// reg goes in ModRM.reg, vvvv in EVEX.vvvv (-1 when unused: encoded as
// 1111, V' set), rm in ModRM.r/m; no masking, no broadcast, no rounding.
// Register numbers are 0..31.
func EVEXRR(opcode byte, pp, mm byte, w bool, l byte, reg, vvvv, rm int) []byte {
	p0 := (1-bit(reg, 3))<<7 | (1-bit(rm, 4))<<6 | (1-bit(rm, 3))<<5 | (1-bit(reg, 4))<<4 | mm
	v := 0x1F // unused: vvvv = 1111 and V' = 1 after inversion
	if vvvv >= 0 {
		v = ^vvvv & 0x1F
	}
	var wb byte
	if w {
		wb = 1
	}
	p1 := wb<<7 | byte(v&0xF)<<3 | 1<<2 | pp
	p2 := l<<5 | byte(v>>4)<<3
	modrm := 0xC0 | byte(reg&7)<<3 | byte(rm&7)
	return []byte{0x62, p0, p1, p2, opcode, modrm}
}

// vex3 returns the three-byte VEX prefix for ModRM.reg bit 3 r, SIB.index
// bit 3 x, ModRM.r/m or SIB.base bit 3 b, the second operand vvvv (-1 when
// unused), L = 0.
func vex3(r, x, b byte, mm byte, w bool, vvvv int, pp byte) []byte {
	var wb byte
	if w {
		wb = 1
	}
	v := byte(0xF)
	if vvvv >= 0 {
		v = ^byte(vvvv) & 0xF
	}
	return []byte{0xC4, (1-r)<<7 | (1-x)<<6 | (1-b)<<5 | mm, wb<<7 | v<<3 | pp}
}

// VEXRR encodes a VEX.128 (L = 0) instruction on registers only:
// ModRM.mod = 11, reg and rm the ModRM fields, vvvv the VEX operand (-1
// unused). Register numbers are 0..15.
func VEXRR(opcode byte, pp, mm byte, w bool, reg, vvvv, rm int) []byte {
	out := vex3(bit(reg, 3), 0, bit(rm, 3), mm, w, vvvv, pp)
	return append(out, opcode, 0xC0|byte(reg&7)<<3|byte(rm&7))
}

// VEXMemSIB encodes a VEX.128 instruction with ModRM.reg = reg and the
// memory operand [base + index*1] (mod = 00 with a SIB byte). base must not
// be RBP or R13 (those need a displacement) and index must not be RSP.
func VEXMemSIB(opcode byte, pp, mm byte, w bool, reg, base, index int) []byte {
	if base&7 == 5 || index == 4 {
		panic("x86enc: base RBP/R13 or index RSP not supported")
	}
	out := vex3(bit(reg, 3), bit(index, 3), bit(base, 3), mm, w, -1, pp)
	return append(out, opcode, byte(reg&7)<<3|4, byte(index&7)<<3|byte(base&7))
}

// VEXMem encodes a VEX.128 instruction with ModRM.reg = reg and the memory
// operand [base] (mod = 00, no index). base must not be RSP, R12, RBP or
// R13.
func VEXMem(opcode byte, pp, mm byte, w bool, reg, base int) []byte {
	if base&7 == 4 || base&7 == 5 {
		panic("x86enc: base RSP/R12/RBP/R13 not supported")
	}
	out := vex3(bit(reg, 3), 0, bit(base, 3), mm, w, -1, pp)
	return append(out, opcode, byte(reg&7)<<3|byte(base&7))
}

// VCVTNEPS2BF16 encodes vcvtneps2bf16 zmm(src) → ymm(dst) (EVEX.512.F3.0F38.W0 72 /r).
func VCVTNEPS2BF16(dstY, srcZ int) []byte {
	return EVEXRR(0x72, PPF3, Map0F38, false, L512, dstY, -1, srcZ)
}

// VDPBF16PS encodes vdpbf16ps zmm(acc) += zmm(a) · zmm(b), pairs of bf16
// (EVEX.512.F3.0F38.W0 52 /r: acc is ModRM.reg, a is vvvv, b is r/m).
func VDPBF16PS(acc, a, b int) []byte {
	return EVEXRR(0x52, PPF3, Map0F38, false, L512, acc, a, b)
}

// LDTILECFG encodes ldtilecfg [base] (VEX.128.NP.0F38.W0 49 /0).
func LDTILECFG(base int) []byte { return VEXMem(0x49, PPNone, Map0F38, false, 0, base) }

// TILERELEASE encodes tilerelease (VEX.128.NP.0F38.W0 49 C0).
func TILERELEASE() []byte { return VEXRR(0x49, PPNone, Map0F38, false, 0, -1, 0) }

// TILEZERO encodes tilezero tmm (VEX.128.F2.0F38.W0 49 11:rrr:000).
func TILEZERO(tmm int) []byte { return VEXRR(0x49, PPF2, Map0F38, false, tmm, -1, 0) }

// TILELOADD encodes tileloadd tmm, [base + stride*1] (VEX.128.F2.0F38.W0 4B /r).
func TILELOADD(tmm, base, stride int) []byte {
	return VEXMemSIB(0x4B, PPF2, Map0F38, false, tmm, base, stride)
}

// TILESTORED encodes tilestored [base + stride*1], tmm (VEX.128.F3.0F38.W0 4B /r).
func TILESTORED(tmm, base, stride int) []byte {
	return VEXMemSIB(0x4B, PPF3, Map0F38, false, tmm, base, stride)
}

// TDPBF16PS encodes tdpbf16ps tmm(c) += tmm(a) · tmm(b) (VEX.128.F3.0F38.W0
// 5C: c is ModRM.reg, a is r/m, b is vvvv).
func TDPBF16PS(c, a, b int) []byte { return VEXRR(0x5C, PPF3, Map0F38, false, c, b, a) }

// VPDPBUSDY encodes AVX-VNNI's {vex} vpdpbusd ymm(acc) += u8 ymm(a) · s8
// ymm(b), dwords of four byte products (VEX.256.66.0F38.W0 50 /r: acc is
// ModRM.reg, a is vvvv, b is r/m). Go's assembler knows only the EVEX
// form, which CPUs with AVX-VNNI but no AVX-512 (Alder Lake) fault on.
func VPDPBUSDY(acc, a, b int) []byte {
	out := VEXRR(0x50, PP66, Map0F38, false, acc, a, b)
	out[2] |= 1 << 2 // VEX.L = 1: 256 bits
	return out
}
