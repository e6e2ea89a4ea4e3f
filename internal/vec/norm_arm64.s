//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON kernels of the LayerNorm row primitives (norm.go), written by
// hand (avo does not target arm64). They perform the operations of their
// Go fallbacks, each rounded (no fused multiply-adds), in the same order
// and into the same lanes, so the results are bitwise the fallbacks'.

// MOMG adds the four elements of VX, widened, and their squares to the
// lane sums S and Q (elements 0-1 in SLO, QLO; 2-3 in SHI, QHI); T is
// scratch.
#define MOMG(VX, SLO, SHI, QLO, QHI, T) \
	FCVTL(T, VX); FADD2(SLO, SLO, T); FMUL2(T, T, T); FADD2(QLO, QLO, T) \
	; FCVTL2(T, VX); FADD2(SHI, SHI, T); FMUL2(T, T, T); FADD2(QHI, QHI, T)

// func momentsNEON(x *float32, n int, s, q *float64)
//
// s[j%16] += x[j], q[j%16] += x[j]² (in float64) for j < n, n a multiple
// of 16: the 16 lanes of each sum in V16-V23 and V24-V31.
TEXT ·momentsNEON(SB), NOSPLIT, $0-32
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	MOVD s+16(FP), R2
	MOVD q+24(FP), R3
	MOVD R2, R4
	VLD1.P 64(R4), [V16.D2, V17.D2, V18.D2, V19.D2]
	VLD1   (R4), [V20.D2, V21.D2, V22.D2, V23.D2]
	MOVD R3, R4
	VLD1.P 64(R4), [V24.D2, V25.D2, V26.D2, V27.D2]
	VLD1   (R4), [V28.D2, V29.D2, V30.D2, V31.D2]
	LSR  $4, R1, R1
	CBZ  R1, momdone

momloop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	MOMG(0, 16, 17, 24, 25, 8)
	MOMG(1, 18, 19, 26, 27, 9)
	MOMG(2, 20, 21, 28, 29, 10)
	MOMG(3, 22, 23, 30, 31, 11)
	SUBS $1, R1, R1
	BNE  momloop

momdone:
	MOVD R2, R4
	VST1.P [V16.D2, V17.D2, V18.D2, V19.D2], 64(R4)
	VST1   [V20.D2, V21.D2, V22.D2, V23.D2], (R4)
	MOVD R3, R4
	VST1.P [V24.D2, V25.D2, V26.D2, V27.D2], 64(R4)
	VST1   [V28.D2, V29.D2, V30.D2, V31.D2], (R4)
	RET

// GRADLO adds x, x², g = dy·w and g·x of elements 0-1 of VX, VW, VD
// (widened) to the lane sums A, B, C, D; GRADHI those of elements 2-3.
// V8-V10 are scratch.
#define GRADLO(VX, VW, VD, A, B, C, D) \
	FCVTL(8, VX); FCVTL(9, VW); FCVTL(10, VD); FMUL2(9, 10, 9) \
	; FADD2(A, A, 8); FMUL2(10, 8, 8); FADD2(B, B, 10) \
	; FADD2(C, C, 9); FMUL2(9, 9, 8); FADD2(D, D, 9)
#define GRADHI(VX, VW, VD, A, B, C, D) \
	FCVTL2(8, VX); FCVTL2(9, VW); FCVTL2(10, VD); FMUL2(9, 10, 9) \
	; FADD2(A, A, 8); FMUL2(10, 8, 8); FADD2(B, B, 10) \
	; FADD2(C, C, 9); FMUL2(9, 9, 8); FADD2(D, D, 9)

// func lnGradSumsNEON(x, w, dy *float32, n int, a, b, c, d *float64)
//
// Lane j%8 of a, b, c, d adds x[j], x[j]², g[j] and g[j]·x[j] for j < n,
// n a multiple of 8 (gradLanes): the lanes in V16-V19, V20-V23, V24-V27,
// V28-V31.
TEXT ·lnGradSumsNEON(SB), NOSPLIT, $0-64
	MOVD x+0(FP), R0
	MOVD w+8(FP), R1
	MOVD dy+16(FP), R2
	MOVD n+24(FP), R3
	MOVD a+32(FP), R4
	MOVD b+40(FP), R5
	MOVD c+48(FP), R6
	MOVD d+56(FP), R7
	VLD1 (R4), [V16.D2, V17.D2, V18.D2, V19.D2]
	VLD1 (R5), [V20.D2, V21.D2, V22.D2, V23.D2]
	VLD1 (R6), [V24.D2, V25.D2, V26.D2, V27.D2]
	VLD1 (R7), [V28.D2, V29.D2, V30.D2, V31.D2]
	LSR  $3, R3, R3
	CBZ  R3, graddone

gradloop:
	VLD1.P 32(R0), [V0.S4, V1.S4]
	VLD1.P 32(R1), [V2.S4, V3.S4]
	VLD1.P 32(R2), [V4.S4, V5.S4]
	GRADLO(0, 2, 4, 16, 20, 24, 28)
	GRADHI(0, 2, 4, 17, 21, 25, 29)
	GRADLO(1, 3, 5, 18, 22, 26, 30)
	GRADHI(1, 3, 5, 19, 23, 27, 31)
	SUBS $1, R3, R3
	BNE  gradloop

graddone:
	VST1 [V16.D2, V17.D2, V18.D2, V19.D2], (R4)
	VST1 [V20.D2, V21.D2, V22.D2, V23.D2], (R5)
	VST1 [V24.D2, V25.D2, V26.D2, V27.D2], (R6)
	VST1 [V28.D2, V29.D2, V30.D2, V31.D2], (R7)
	RET

// LNROWV sets Y = float32((float64(X)-mean)·rstd)·W + B, mean in V16 and
// rstd in V17 (both lanes); T1-T3 are scratch (Y may be T3).
#define LNROWV(Y, X, W, B, T1, T2) \
	FCVTL(T1, X); FCVTL2(T2, X); FSUB2(T1, T1, 16); FSUB2(T2, T2, 16) \
	; FMUL2(T1, T1, 17); FMUL2(T2, T2, 17); FCVTN(Y, T1); FCVTN2(Y, T2) \
	; FMUL4(Y, Y, W); FADD4(Y, Y, B)

// func lnRowNEON(y, x, w, b *float32, n int, mean, rstd float64)
TEXT ·lnRowNEON(SB), NOSPLIT, $0-56
	MOVD  y+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  w+16(FP), R2
	MOVD  b+24(FP), R3
	MOVD  n+32(FP), R4
	FMOVD mean+40(FP), F16
	FMOVD rstd+48(FP), F17
	DUPD(16, 16)
	DUPD(17, 17)
	LSR   $3, R4, R4
	CBZ   R4, rowdone

rowloop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1.P 32(R2), [V2.S4, V3.S4]
	VLD1.P 32(R3), [V4.S4, V5.S4]
	LNROWV(6, 0, 2, 4, 8, 9)
	LNROWV(7, 1, 3, 5, 10, 11)
	VST1.P [V6.S4, V7.S4], 32(R0)
	SUBS  $1, R4, R4
	BNE   rowloop

rowdone:
	RET

// GXH computes, for two elements widened in TX (x), TW (w) and TD (dy),
// TD = rstd·((g - sg) - xhat·sgx), g = dy·w, xhat = (x-mean)·rstd; mean,
// rstd, sg, sgx in V16-V19.
#define GXH(TX, TW, TD) \
	FMUL2(TD, TD, TW); FSUB2(TX, TX, 16); FMUL2(TX, TX, 17) \
	; FSUB2(TD, TD, 18); FMUL2(TX, TX, 19); FSUB2(TD, TD, TX); FMUL2(TD, 17, TD)

// GXV sets Y (float32 × 4) from X, W, D by GXH; V8-V13 are scratch.
#define GXV(Y, X, W, D) \
	FCVTL(8, X); FCVTL(9, W); FCVTL(10, D); FCVTL2(11, X); FCVTL2(12, W); FCVTL2(13, D) \
	; GXH(8, 9, 10); GXH(11, 12, 13); FCVTN(Y, 10); FCVTN2(Y, 13)

// func lnGradXRowNEON(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64)
TEXT ·lnGradXRowNEON(SB), NOSPLIT, $0-72
	MOVD  dx+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  w+16(FP), R2
	MOVD  dy+24(FP), R3
	MOVD  n+32(FP), R4
	FMOVD mean+40(FP), F16
	FMOVD rstd+48(FP), F17
	FMOVD sg+56(FP), F18
	FMOVD sgx+64(FP), F19
	DUPD(16, 16)
	DUPD(17, 17)
	DUPD(18, 18)
	DUPD(19, 19)
	LSR   $3, R4, R4
	CBZ   R4, gxdone

gxloop:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1.P 32(R2), [V2.S4, V3.S4]
	VLD1.P 32(R3), [V4.S4, V5.S4]
	GXV(6, 0, 2, 4)
	GXV(7, 1, 3, 5)
	VST1.P [V6.S4, V7.S4], 32(R0)
	SUBS  $1, R4, R4
	BNE   gxloop

gxdone:
	RET

// GWH adds float64(dy)·(float64(x)-mean)·rstd, left to right, to A, for
// two elements widened in TX and TD; mean, rstd in V16, V17.
#define GWH(A, TX, TD) \
	FSUB2(TX, TX, 16); FMUL2(TD, TD, TX); FMUL2(TD, TD, 17); FADD2(A, A, TD)

// func lnGradWAccumNEON(acc *float64, x, dy *float32, n int, mean, rstd float64)
TEXT ·lnGradWAccumNEON(SB), NOSPLIT, $0-48
	MOVD  acc+0(FP), R0
	MOVD  x+8(FP), R1
	MOVD  dy+16(FP), R2
	MOVD  n+24(FP), R3
	FMOVD mean+32(FP), F16
	FMOVD rstd+40(FP), F17
	DUPD(16, 16)
	DUPD(17, 17)
	LSR   $3, R3, R3
	CBZ   R3, gwdone

gwloop:
	VLD1   (R0), [V0.D2, V1.D2, V2.D2, V3.D2]
	VLD1.P 32(R1), [V4.S4, V5.S4]
	VLD1.P 32(R2), [V6.S4, V7.S4]
	FCVTL(8, 4)
	FCVTL(9, 6)
	FCVTL2(10, 4)
	FCVTL2(11, 6)
	FCVTL(12, 5)
	FCVTL(13, 7)
	FCVTL2(14, 5)
	FCVTL2(15, 7)
	GWH(0, 8, 9)
	GWH(1, 10, 11)
	GWH(2, 12, 13)
	GWH(3, 14, 15)
	VST1.P [V0.D2, V1.D2, V2.D2, V3.D2], 64(R0)
	SUBS  $1, R3, R3
	BNE   gwloop

gwdone:
	RET
