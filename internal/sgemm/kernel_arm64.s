//go:build arm64 && !purego

#include "textflag.h"

// Hand-written (avo does not target arm64). The by-element forms of FMLA
// and FMUL, which Go's arm64 assembler does not spell, are WORDs:
// FMLA Vd.4S, Vn.4S, Vm.S[i] is 0x4F801000 | L<<21 | M:Rm<<16 | H<<11 |
// Rn<<5 | Rd with i = H:L; FMUL is 0x4F809000 with the same fields.
#define FMLAE(d, n, m, i) WORD $(0x4F801000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
#define FMULE(d, n, m, i) WORD $(0x4F809000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))

// func kernelNEON8x8P(k int, a *float32, lda int, b *float32, c *float32, ldc int, alpha float32, acc bool)
//
// C (8x8, rows ldc elements apart) = alpha·A·B, or += with acc, from a
// packed A panel (k groups of 8) and a packed B panel (k groups of 8).
// Row i of the tile accumulates in V(16+2i) (columns 0-3) and V(17+2i)
// (columns 4-7); for each p, V0:V1 hold B's 8 values and V2:V3 A's 8,
// and every accumulator takes one fused multiply-add, in the order of p.
// Then C = s·alpha (FMUL), or C = C + s·alpha fused (FMLA).
TEXT ·kernelNEON8x8P(SB), NOSPLIT, $0-53
	MOVD k+0(FP), R0
	MOVD a+8(FP), R1
	MOVD b+24(FP), R2
	MOVD c+32(FP), R3
	MOVD ldc+40(FP), R4
	LSL  $2, R4, R4
	VEOR V16.B16, V16.B16, V16.B16
	VEOR V17.B16, V17.B16, V17.B16
	VEOR V18.B16, V18.B16, V18.B16
	VEOR V19.B16, V19.B16, V19.B16
	VEOR V20.B16, V20.B16, V20.B16
	VEOR V21.B16, V21.B16, V21.B16
	VEOR V22.B16, V22.B16, V22.B16
	VEOR V23.B16, V23.B16, V23.B16
	VEOR V24.B16, V24.B16, V24.B16
	VEOR V25.B16, V25.B16, V25.B16
	VEOR V26.B16, V26.B16, V26.B16
	VEOR V27.B16, V27.B16, V27.B16
	VEOR V28.B16, V28.B16, V28.B16
	VEOR V29.B16, V29.B16, V29.B16
	VEOR V30.B16, V30.B16, V30.B16
	VEOR V31.B16, V31.B16, V31.B16
	CBZ  R0, done

loop:
	VLD1.P 32(R2), [V0.S4, V1.S4]
	VLD1.P 32(R1), [V2.S4, V3.S4]
	FMLAE(16, 0, 2, 0)
	FMLAE(17, 1, 2, 0)
	FMLAE(18, 0, 2, 1)
	FMLAE(19, 1, 2, 1)
	FMLAE(20, 0, 2, 2)
	FMLAE(21, 1, 2, 2)
	FMLAE(22, 0, 2, 3)
	FMLAE(23, 1, 2, 3)
	FMLAE(24, 0, 3, 0)
	FMLAE(25, 1, 3, 0)
	FMLAE(26, 0, 3, 1)
	FMLAE(27, 1, 3, 1)
	FMLAE(28, 0, 3, 2)
	FMLAE(29, 1, 3, 2)
	FMLAE(30, 0, 3, 3)
	FMLAE(31, 1, 3, 3)
	SUBS $1, R0, R0
	BNE  loop

done:
	FMOVS   alpha+48(FP), F4
	MOVBU   acc+52(FP), R5
	CBNZ    R5, accumulate
	FMULE(16, 16, 4, 0)
	FMULE(17, 17, 4, 0)
	VST1 [V16.S4, V17.S4], (R3)
	ADD  R4, R3, R3
	FMULE(18, 18, 4, 0)
	FMULE(19, 19, 4, 0)
	VST1 [V18.S4, V19.S4], (R3)
	ADD  R4, R3, R3
	FMULE(20, 20, 4, 0)
	FMULE(21, 21, 4, 0)
	VST1 [V20.S4, V21.S4], (R3)
	ADD  R4, R3, R3
	FMULE(22, 22, 4, 0)
	FMULE(23, 23, 4, 0)
	VST1 [V22.S4, V23.S4], (R3)
	ADD  R4, R3, R3
	FMULE(24, 24, 4, 0)
	FMULE(25, 25, 4, 0)
	VST1 [V24.S4, V25.S4], (R3)
	ADD  R4, R3, R3
	FMULE(26, 26, 4, 0)
	FMULE(27, 27, 4, 0)
	VST1 [V26.S4, V27.S4], (R3)
	ADD  R4, R3, R3
	FMULE(28, 28, 4, 0)
	FMULE(29, 29, 4, 0)
	VST1 [V28.S4, V29.S4], (R3)
	ADD  R4, R3, R3
	FMULE(30, 30, 4, 0)
	FMULE(31, 31, 4, 0)
	VST1 [V30.S4, V31.S4], (R3)
	RET

accumulate:
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 16, 4, 0)
	FMLAE(1, 17, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 18, 4, 0)
	FMLAE(1, 19, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 20, 4, 0)
	FMLAE(1, 21, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 22, 4, 0)
	FMLAE(1, 23, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 24, 4, 0)
	FMLAE(1, 25, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 26, 4, 0)
	FMLAE(1, 27, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 28, 4, 0)
	FMLAE(1, 29, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	ADD  R4, R3, R3
	VLD1 (R3), [V0.S4, V1.S4]
	FMLAE(0, 30, 4, 0)
	FMLAE(1, 31, 4, 0)
	VST1 [V0.S4, V1.S4], (R3)
	RET
