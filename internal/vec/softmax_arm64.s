//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON kernels of the softmax row primitives (softmax.go), written by
// hand (avo does not target arm64). Each computes what its Go fallback
// computes, in the same order, with the fallback's emulated FMAs (fma32)
// as FMLA, so the results are bitwise the fallback's (TestSoftmaxNEON...).

// The exp constants (softmax.go: expHi, expLo, expLog2e, expMagic,
// expLn2Hi, expLn2Lo, expCoeffs), packed four to a register.
DATA expconst<>+0(SB)/4, $0x42b0bd71 // expHi = 88.37
DATA expconst<>+4(SB)/4, $0xc2b00000 // expLo = -88
DATA expconst<>+8(SB)/4, $0x3fb8aa3b // log2e
DATA expconst<>+12(SB)/4, $0x4b400000 // magic = 0x1.8p23
DATA expconst<>+16(SB)/4, $0xbf317218 // -ln2Hi
DATA expconst<>+20(SB)/4, $0x3102e308 // -ln2Lo
DATA expconst<>+24(SB)/4, $0x3f800000 // 127<<23
DATA expconst<>+28(SB)/4, $0x7f800000 // +Inf
DATA expconst<>+32(SB)/4, $0x3f800000 // e1
DATA expconst<>+36(SB)/4, $0x3effffff // e2
DATA expconst<>+40(SB)/4, $0x3e2aaa4f // e3
DATA expconst<>+44(SB)/4, $0x3d2aabd4 // e4
DATA expconst<>+48(SB)/4, $0x3c09194d // e5
DATA expconst<>+52(SB)/4, $0x3ab5682c // e6
DATA expconst<>+56(SB)/4, $0x00000000
DATA expconst<>+60(SB)/4, $0x00000000
GLOBL expconst<>(SB), RODATA|NOPTR, $64

// EXPV computes T = exp(fma(X, scale, -shift)) by expArg's steps, with
// V16 = scale, V17 = -shift and the constants broadcast in V18-V31 (hi,
// lo, log2e, magic, -ln2Hi, -ln2Lo, 127<<23, +Inf, e1..e6). X, W, F, R
// and P are scratch.
// In order: w = fma(x, scale, -shift); X = (w > hi), the lanes that give
// +Inf; w clamped to [lo, hi]; f = fma(w, log2e, magic); nf = f - magic;
// r = fma(nf, -ln2Lo, fma(nf, -ln2Hi, w)); p by Horner's rule from e6 to
// e1, each step fma(p, r, e_j); pm1 = r·p; s = 2^n = (bits(f)<<23) +
// 127<<23; T = fma(pm1, s, s), +Inf where X.
#define EXPV(X, W, F, R, P, T) \
	MOVV(W, 17); FMLA4(W, X, 16) \
	; FCMGT4(X, W, 18) \
	; FMIN4(W, W, 18); FMAX4(W, W, 19) \
	; MOVV(F, 21); FMLA4(F, W, 20) \
	; FSUB4(R, F, 21) \
	; MOVV(T, W); FMLA4(T, R, 22); FMLA4(T, R, 23) \
	; MOVV(P, 30); FMLA4(P, 31, T) \
	; MOVV(R, 29); FMLA4(R, P, T) \
	; MOVV(P, 28); FMLA4(P, R, T) \
	; MOVV(R, 27); FMLA4(R, P, T) \
	; MOVV(P, 26); FMLA4(P, R, T) \
	; FMUL4(P, T, P) \
	; SHL4(F, F, 23); ADD4(F, F, 24) \
	; MOVV(T, F); FMLA4(T, P, F) \
	; BIT(T, 25, X)

// func expSumNEON(y, x *float32, n int, scale, shift float32, acc *float64)
TEXT ·expSumNEON(SB), NOSPLIT, $0-40
	MOVD  y+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  n+16(FP), R2
	FMOVS scale+24(FP), F16
	FMOVS shift+28(FP), F17
	MOVD  acc+32(FP), R3
	FNEGS F17, F17
	DUPE(16, 16, 0)
	DUPE(17, 17, 0)
	MOVD  $expconst<>(SB), R4
	VLD1  (R4), [V0.S4, V1.S4, V2.S4, V3.S4]
	DUPE(18, 0, 0)
	DUPE(19, 0, 1)
	DUPE(20, 0, 2)
	DUPE(21, 0, 3)
	DUPE(22, 1, 0)
	DUPE(23, 1, 1)
	DUPE(24, 1, 2)
	DUPE(25, 1, 3)
	DUPE(26, 2, 0)
	DUPE(27, 2, 1)
	DUPE(28, 2, 2)
	DUPE(29, 2, 3)
	DUPE(30, 3, 0)
	DUPE(31, 3, 1)
	VLD1  (R3), [V12.D2, V13.D2, V14.D2, V15.D2]
	LSR   $3, R2, R2
	CBZ   R2, expdone

exploop:
	VLD1.P 16(R1), [V0.S4]
	VLD1.P 16(R1), [V6.S4]
	EXPV(0, 1, 2, 3, 4, 5)
	EXPV(6, 7, 8, 9, 10, 11)
	VST1.P [V5.S4], 16(R0)
	VST1.P [V11.S4], 16(R0)
	FCVTL(0, 5)
	FCVTL2(1, 5)
	FCVTL(6, 11)
	FCVTL2(7, 11)
	FADD2(12, 12, 0)
	FADD2(13, 13, 1)
	FADD2(14, 14, 6)
	FADD2(15, 15, 7)
	SUBS  $1, R2, R2
	BNE   exploop

expdone:
	VST1  [V12.D2, V13.D2, V14.D2, V15.D2], (R3)
	RET

// func maxNEON(x *float32, n int, m *float32)
//
// m[l] = m[l] > x[j] ? m[l] : x[j] for j%8 = l (maxGo), and all bits set
// in the lanes where some x[j] was NaN. V0:V1 hold m, V2:V3 the NaN
// lanes.
TEXT ·maxNEON(SB), NOSPLIT, $0-24
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD m+16(FP), R2
	VLD1 (R2), [V0.S4, V1.S4]
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	LSR  $3, R1, R1
	CBZ  R1, maxdone

maxloop:
	VLD1.P 32(R0), [V4.S4, V5.S4]
	FCMGT4(6, 0, 4) // m > x
	FCMGT4(7, 1, 5)
	BSL(6, 0, 4)    // m > x ? m : x
	BSL(7, 1, 5)
	MOVV(0, 6)
	MOVV(1, 7)
	FCMEQ4(6, 4, 4) // x == x: not NaN
	FCMEQ4(7, 5, 5)
	ORN(2, 2, 6)
	ORN(3, 3, 7)
	SUBS $1, R1, R1
	BNE  maxloop

maxdone:
	ORR(0, 0, 2)
	ORR(1, 1, 3)
	VST1 [V0.S4, V1.S4], (R2)
	RET

// func scaleNEON(y, x *float32, n int, a float32)
//
// y[j] = x[j]·a for j < n, n a multiple of 8.
TEXT ·scaleNEON(SB), NOSPLIT, $0-28
	MOVD  y+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  n+16(FP), R2
	FMOVS a+24(FP), F4
	DUPE(4, 4, 0)
	LSR   $3, R2, R2
	CBZ   R2, scaledone

scaleloop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	FMUL4(0, 0, 4)
	FMUL4(1, 1, 4)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUBS  $1, R2, R2
	BNE   scaleloop

scaledone:
	RET

// DOTG adds the products of a (VA) and b (VB), widened to float64 and
// multiplied exactly, to the lane sums in VLO (elements 0-1) and VHI
// (2-3); V8 and V9 are scratch.
#define DOTG(VA, VB, VLO, VHI) \
	FCVTL(8, VA); FCVTL(9, VB); FMUL2(8, 8, 9); FADD2(VLO, VLO, 8) \
	; FCVTL2(8, VA); FCVTL2(9, VB); FMUL2(8, 8, 9); FADD2(VHI, VHI, 8)

// func dotNEON(a, b *float32, n int, acc *float64)
//
// acc[j%32] += float64(a[j])·float64(b[j]) for j < n, n a multiple of 32,
// in order of j: the 32 lane sums in V16-V31.
TEXT ·dotNEON(SB), NOSPLIT, $0-32
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	MOVD acc+24(FP), R3
	MOVD R3, R4
	VLD1.P 64(R4), [V16.D2, V17.D2, V18.D2, V19.D2]
	VLD1.P 64(R4), [V20.D2, V21.D2, V22.D2, V23.D2]
	VLD1.P 64(R4), [V24.D2, V25.D2, V26.D2, V27.D2]
	VLD1   (R4), [V28.D2, V29.D2, V30.D2, V31.D2]
	LSR  $5, R2, R2
	CBZ  R2, dotdone

dotloop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	DOTG(0, 4, 16, 17)
	DOTG(1, 5, 18, 19)
	DOTG(2, 6, 20, 21)
	DOTG(3, 7, 22, 23)
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	DOTG(0, 4, 24, 25)
	DOTG(1, 5, 26, 27)
	DOTG(2, 6, 28, 29)
	DOTG(3, 7, 30, 31)
	SUBS $1, R2, R2
	BNE  dotloop

dotdone:
	MOVD R3, R4
	VST1.P [V16.D2, V17.D2, V18.D2, V19.D2], 64(R4)
	VST1.P [V20.D2, V21.D2, V22.D2, V23.D2], 64(R4)
	VST1.P [V24.D2, V25.D2, V26.D2, V27.D2], 64(R4)
	VST1   [V28.D2, V29.D2, V30.D2, V31.D2], (R4)
	RET
