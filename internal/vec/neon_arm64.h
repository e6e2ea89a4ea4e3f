// Advanced SIMD (NEON) instructions that Go's arm64 assembler does not
// spell, as WORDs: d, n and m are V register numbers. The vector forms
// are the 128-bit ones (Q = 1): 4S for float32, 2D for float64.

// float32 × 4
#define FADD4(d, n, m)  WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d)) // d = n + m
#define FSUB4(d, n, m)  WORD $(0x4EA0D400 | ((m)<<16) | ((n)<<5) | (d)) // d = n - m
#define FMUL4(d, n, m)  WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d)) // d = n · m
#define FDIV4(d, n, m)  WORD $(0x6E20FC00 | ((m)<<16) | ((n)<<5) | (d)) // d = n / m
#define FMLA4(d, n, m)  WORD $(0x4E20CC00 | ((m)<<16) | ((n)<<5) | (d)) // d = d + n·m, fused
#define FMLS4(d, n, m)  WORD $(0x4EA0CC00 | ((m)<<16) | ((n)<<5) | (d)) // d = d - n·m, fused
#define FMIN4(d, n, m)  WORD $(0x4EA0F400 | ((m)<<16) | ((n)<<5) | (d)) // NaN if either is NaN
#define FMAX4(d, n, m)  WORD $(0x4E20F400 | ((m)<<16) | ((n)<<5) | (d)) // NaN if either is NaN
#define FCMGT4(d, n, m) WORD $(0x6EA0E400 | ((m)<<16) | ((n)<<5) | (d)) // d = n > m ? ones : 0
#define FCMEQ4(d, n, m) WORD $(0x4E20E400 | ((m)<<16) | ((n)<<5) | (d)) // d = n == m ? ones : 0
#define FCMLTZ4(d, n)   WORD $(0x4EA0E800 | ((n)<<5) | (d))             // d = n < 0 ? ones : 0
#define FABS4(d, n)     WORD $(0x4EA0F800 | ((n)<<5) | (d))
#define FNEG4(d, n)     WORD $(0x6EA0F800 | ((n)<<5) | (d))

// By element: m.S[i] as the second operand.
#define FMULE(d, n, m, i) WORD $(0x4F809000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
#define FMLAE(d, n, m, i) WORD $(0x4F801000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
#define FMLSE(d, n, m, i) WORD $(0x4F805000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
#define DUPE(d, n, i)     WORD $(0x4E040400 | ((i)<<19) | ((n)<<5) | (d)) // d.4S = n.S[i]

// float64 × 2
#define FADD2(d, n, m) WORD $(0x4E60D400 | ((m)<<16) | ((n)<<5) | (d))
#define FSUB2(d, n, m) WORD $(0x4EE0D400 | ((m)<<16) | ((n)<<5) | (d))
#define FMUL2(d, n, m) WORD $(0x6E60DC00 | ((m)<<16) | ((n)<<5) | (d))
#define DUPD(d, n)     WORD $(0x4E080400 | ((n)<<5) | (d)) // d.2D = n.D[0]

// Conversions: FCVTL widens the low two float32 of n, FCVTL2 the high
// two; FCVTN narrows n's two float64 into the low half of d (the high
// half zeroed), FCVTN2 into the high half (the low half kept). Both round
// to nearest (the FPCR's mode, as Go's conversions).
#define FCVTL(d, n)  WORD $(0x0E617800 | ((n)<<5) | (d))
#define FCVTL2(d, n) WORD $(0x4E617800 | ((n)<<5) | (d))
#define FCVTN(d, n)  WORD $(0x0E616800 | ((n)<<5) | (d))
#define FCVTN2(d, n) WORD $(0x4E616800 | ((n)<<5) | (d))

// Integer and bitwise, on the whole register.
#define ADD4(d, n, m)  WORD $(0x4EA08400 | ((m)<<16) | ((n)<<5) | (d)) // 32-bit lanes
#define SHL4(d, n, sh) WORD $(0x4F005400 | ((32+(sh))<<16) | ((n)<<5) | (d))
#define ORR(d, n, m)   WORD $(0x4EA01C00 | ((m)<<16) | ((n)<<5) | (d))
#define ORN(d, n, m)   WORD $(0x4EE01C00 | ((m)<<16) | ((n)<<5) | (d)) // d = n | ^m
#define MOVV(d, n)     ORR(d, n, n)
#define BSL(d, n, m)   WORD $(0x6E601C00 | ((m)<<16) | ((n)<<5) | (d)) // d = d ? n : m, bit by bit
#define BIT(d, n, m)   WORD $(0x6EA01C00 | ((m)<<16) | ((n)<<5) | (d)) // d = m ? n : d, bit by bit
