//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON kernels of GELU and GELUGrad, written by hand (avo does not
// target arm64): per element, the steps of the pure-Go geluOf and
// geluSlope1 (gelu.go explains the algorithm), with geluFMA as a fused
// FMLA/FMLS. The Go fallback emulates the FMAs in float64, which rounds
// twice in rare cases, so the two agree within 2 ulp rather than bitwise
// (TestGELUImplsAgree); the kernels' accuracy is tested on their own.
// One vector of 4 per trip: the loop's trips are independent, so an
// out-of-order core overlaps their long chains (a division and three
// polynomials).
//
// Registers: V0 = x, V1 = xu, V2 = xc, V3 = a = |xc|, V5 = t, V7 = cG,
// V8 = m, V9 = R(t), V10 = 2^n, V11 = pm1; the constants packed in
// V22-V31 (as the table says) and broadcast in V16 (127<<23), V17
// (erfBound²/2), V18 (magic), V19 (-clamp), V20 (clamp), V21 (1).

DATA geluconst<>+0(SB)/4, $0x3f800000 // V22.S[0]: one
DATA geluconst<>+4(SB)/4, $0x3f000000 // V22.S[1]: half
DATA geluconst<>+8(SB)/4, $0xbf000000 // V22.S[2]: -half
DATA geluconst<>+12(SB)/4, $0x41540000 // V22.S[3]: clamp = 13.25
DATA geluconst<>+16(SB)/4, $0xc1540000 // V23.S[0]: -clamp
DATA geluconst<>+20(SB)/4, $0x3e99999a // V23.S[1]: k = 0.3
DATA geluconst<>+24(SB)/4, $0x3e900000 // V23.S[2]: erfBound²/2 = 0.28125
DATA geluconst<>+28(SB)/4, $0x3fb8aa3b // V23.S[3]: log2e
DATA geluconst<>+32(SB)/4, $0x4b400000 // V24.S[0]: magic = 0x1.8p23
DATA geluconst<>+36(SB)/4, $0xbf317218 // V24.S[1]: -ln2Hi
DATA geluconst<>+40(SB)/4, $0x3102e308 // V24.S[2]: -ln2Lo
DATA geluconst<>+44(SB)/4, $0x3ecc422a // V24.S[3]: 1/√(2π)
DATA geluconst<>+48(SB)/4, $0x3f800000 // V25.S[0]: 127<<23
DATA geluconst<>+52(SB)/4, $0x3f5734dc // V25.S[1]: g0
DATA geluconst<>+56(SB)/4, $0x3fe693d1 // V25.S[2]: g1
DATA geluconst<>+60(SB)/4, $0x3d5daed0 // V25.S[3]: g2
DATA geluconst<>+64(SB)/4, $0x3df51d69 // V26.S[0]: r0
DATA geluconst<>+68(SB)/4, $0x3df4f451 // V26.S[1]: r1
DATA geluconst<>+72(SB)/4, $0x3de12285 // V26.S[2]: r2
DATA geluconst<>+76(SB)/4, $0x3da3a581 // V26.S[3]: r3
DATA geluconst<>+80(SB)/4, $0x3dbb65f9 // V27.S[0]: r4
DATA geluconst<>+84(SB)/4, $0xbd8fcfcb // V27.S[1]: r5
DATA geluconst<>+88(SB)/4, $0x3e385dc8 // V27.S[2]: r6
DATA geluconst<>+92(SB)/4, $0xbe602370 // V27.S[3]: r7
DATA geluconst<>+96(SB)/4, $0x3dddac42 // V28.S[0]: r8
DATA geluconst<>+100(SB)/4, $0xbca2437e // V28.S[1]: r9
DATA geluconst<>+104(SB)/4, $0x3f800000 // V28.S[2]: e1
DATA geluconst<>+108(SB)/4, $0x3effffff // V28.S[3]: e2
DATA geluconst<>+112(SB)/4, $0x3e2aaa4f // V29.S[0]: e3
DATA geluconst<>+116(SB)/4, $0x3d2aabd4 // V29.S[1]: e4
DATA geluconst<>+120(SB)/4, $0x3c09194d // V29.S[2]: e5
DATA geluconst<>+124(SB)/4, $0x3ab5682c // V29.S[3]: e6
DATA geluconst<>+128(SB)/4, $0x3f4c422a // V30.S[0]: erf0
DATA geluconst<>+132(SB)/4, $0xbe882c6b // V30.S[1]: erf1
DATA geluconst<>+136(SB)/4, $0x3da37c93 // V30.S[2]: erf2
DATA geluconst<>+140(SB)/4, $0xbc9d1f95 // V30.S[3]: erf3
DATA geluconst<>+144(SB)/4, $0x3b78abc0 // V31.S[0]: erf4
DATA geluconst<>+148(SB)/4, $0x00000000 // V31.S[1]: (unused)
DATA geluconst<>+152(SB)/4, $0x00000000 // V31.S[2]: (unused)
DATA geluconst<>+156(SB)/4, $0x00000000 // V31.S[3]: (unused)
GLOBL geluconst<>(SB), RODATA|NOPTR, $160

// GELUCONST loads the constants; R4 is scratch.
#define GELUCONST \
	MOVD $geluconst<>(SB), R4 \
	; VLD1.P 64(R4), [V22.S4, V23.S4, V24.S4, V25.S4] \
	; VLD1.P 64(R4), [V26.S4, V27.S4, V28.S4, V29.S4] \
	; VLD1 (R4), [V30.S4, V31.S4] \
	; DUPE(16, 25, 0); DUPE(17, 23, 2); DUPE(18, 24, 0) \
	; DUPE(19, 23, 0); DUPE(20, 22, 3); DUPE(21, 22, 0)

// GELUTAIL computes the erfc-branch quantities of x (newGeluTail).
#define GELUTAIL \
	FMIN4(1, 0, 20); FMAX4(2, 1, 19); FABS4(3, 2) \
	; MOVV(4, 21); FMLAE(4, 3, 23, 1) \
	; FDIV4(5, 21, 4) \
	; FSUB4(6, 21, 4); FMLAE(6, 3, 23, 1) \
	; MOVV(7, 21); FMLS4(7, 4, 5); FMLS4(7, 6, 5) \
	; DUPE(8, 25, 3); DUPE(9, 25, 2); FMLA4(9, 8, 5); DUPE(8, 25, 1); FMLA4(8, 9, 5) \
	; FMUL4(7, 7, 8) \
	; DUPE(8, 28, 1) \
	; DUPE(9, 28, 0); FMLA4(9, 8, 5) \
	; DUPE(8, 27, 3); FMLA4(8, 9, 5) \
	; DUPE(9, 27, 2); FMLA4(9, 8, 5) \
	; DUPE(8, 27, 1); FMLA4(8, 9, 5) \
	; DUPE(9, 27, 0); FMLA4(9, 8, 5) \
	; DUPE(8, 26, 3); FMLA4(8, 9, 5) \
	; DUPE(9, 26, 2); FMLA4(9, 8, 5) \
	; DUPE(8, 26, 1); FMLA4(8, 9, 5) \
	; DUPE(9, 26, 0); FMLA4(9, 8, 5) \
	; FMULE(4, 3, 22, 2); FMUL4(6, 4, 3) \
	; FNEG4(8, 6); FMLA4(8, 4, 3) \
	; MOVV(10, 18); FMLAE(10, 6, 23, 3); FSUB4(11, 10, 18) \
	; FMLAE(6, 11, 24, 1); FMLAE(8, 11, 24, 2); FADD4(6, 6, 8) \
	; DUPE(8, 29, 3) \
	; DUPE(11, 29, 2); FMLA4(11, 8, 6) \
	; DUPE(8, 29, 1); FMLA4(8, 11, 6) \
	; DUPE(11, 29, 0); FMLA4(11, 8, 6) \
	; DUPE(8, 28, 3); FMLA4(8, 11, 6) \
	; DUPE(11, 28, 2); FMLA4(11, 8, 6) \
	; FMUL4(11, 11, 6) \
	; FADD4(8, 11, 7); FMLA4(8, 11, 7) \
	; SHL4(10, 10, 23); ADD4(10, 10, 16)

// In GELUTAIL's order: xu = min(x, clamp), xc = max(xu, -clamp), a =
// |xc|; d = fma(a, k, 1), t = 1/d, dlo = fma(a, k, 1-d), corr =
// fma(-dlo, t, fma(-d, t, 1)); cG = corr·G(t); R(t) (Horner, r9 down to
// r0); ma = a·(-1/2), whi = ma·a, wlo = fma(ma, a, -whi); f = fma(whi,
// log2e, magic), nf = f - magic, r = fma(nf, -ln2Hi, whi) + fma(nf,
// -ln2Lo, wlo); pm1 = P(r)·r (e6 down to e1); m = fma(pm1, cG, pm1+cG);
// 2^n = (bits(f)<<23) + 127<<23.

// func geluNEON(y, x *float32, n int)
//
// y[i] = GELU(x[i]) for i < n, n a multiple of 4 (geluOf).
TEXT ·geluNEON(SB), NOSPLIT, $0-24
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	MOVD n+16(FP), R2
	GELUCONST
	LSR  $2, R2, R2
	CBZ  R2, fwddone

fwdloop:
	VLD1.P 16(R1), [V0.S4]
	GELUTAIL
	// P = fma(X, R, sm·R)·2^n, X = xu·t, sm = fma(X, m, fma(xu, t, -X)).
	FMUL4(4, 1, 5)
	FNEG4(6, 4)
	FMLA4(6, 1, 5)
	FMLA4(6, 4, 8)
	FMUL4(7, 6, 9)
	FMLA4(7, 4, 9)
	FMUL4(7, 7, 10)
	// y = P where x < 0, else x - P.
	FSUB4(12, 0, 7)
	FCMLTZ4(13, 0)
	BIT(12, 7, 13)
	// s = (x/2)·x < erfBound²/2: y = fma(s, Q(s), x/2), Q from erf4 down.
	FMULE(14, 0, 22, 1)
	FMUL4(15, 14, 0)
	DUPE(6, 31, 0)
	DUPE(4, 30, 3)
	FMLA4(4, 6, 15)
	DUPE(6, 30, 2)
	FMLA4(6, 4, 15)
	DUPE(4, 30, 1)
	FMLA4(4, 6, 15)
	DUPE(6, 30, 0)
	FMLA4(6, 4, 15)
	FMLA4(14, 15, 6)
	FCMGT4(13, 17, 15)
	BIT(12, 14, 13)
	VST1.P [V12.S4], 16(R0)
	SUBS $1, R2, R2
	BNE  fwdloop

fwddone:
	RET

// func geluGradNEON(dx, x, dy *float32, n int)
//
// dx[i] = dy[i]·GELU'(x[i]) for i < n, n a multiple of 4 (geluSlope1).
TEXT ·geluGradNEON(SB), NOSPLIT, $0-32
	MOVD dx+0(FP), R0
	MOVD x+8(FP), R1
	MOVD dy+16(FP), R3
	MOVD n+24(FP), R2
	GELUCONST
	LSR  $2, R2, R2
	CBZ  R2, graddone

gradloop:
	VLD1.P 16(R1), [V0.S4]
	VLD1.P 16(R3), [V15.S4]
	GELUTAIL
	// D = (fma(q, m, q) - fma(xa, pm1, xa))·2^n, q = t·R, xa = a/√(2π).
	FMUL4(4, 5, 9)
	MOVV(6, 4)
	FMLA4(6, 4, 8)
	FMULE(7, 3, 24, 3)
	MOVV(12, 7)
	FMLA4(12, 7, 11)
	FSUB4(6, 6, 12)
	FMUL4(6, 6, 10)
	// The slope is D where x < 0, else 1 - D; dx = dy·slope.
	FSUB4(13, 21, 6)
	FCMLTZ4(14, 0)
	BIT(13, 6, 14)
	FMUL4(13, 15, 13)
	VST1.P [V13.S4], 16(R0)
	SUBS $1, R2, R2
	BNE  gradloop

graddone:
	RET
