// Package bf16gemm multiplies bfloat16 matrices with float32 accumulation:
// C(f32) = op(A)·op(B) for row-major A and B held as bf16 bits ([]uint16),
// in the forms the GPT's linear layers and attention run (A·Bᵀ, A·B, Aᵀ·B,
// as internal/sgemm's Sgemm takes them), for the measured precision
// optimization of mixed-precision training.
//
// It has three paths; which one a product takes is measured, not
// preferred (calibrate.go): on the first product of each shape every path
// the machine runs is timed on that shape for a few milliseconds, and the
// shape keeps the fastest for the process (Path names the choices on
// every report's kernels line, Choices lists their times).
// GPTLAB_BF16=widen|avx512bf16|amx forces one for comparisons, off keeps
// the hardware paths out; a value naming no path, or one the machine
// lacks, is EnvError.
//
//   - "amx": AMX-BF16's TDPBF16PS on 16x16 tiles, 32x32 blocks of C, a
//     row panel's strip of them per kernel call (one LDTILECFG a strip). Go's assembler has no AMX mnemonics: the instructions
//     are bytes (asm/, avo). It is there only where the CPU reports
//     AMX-TILE and AMX-BF16, the OS enables the tile state in XCR0 and
//     grants this process the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM,
//     XFEATURE_XTILEDATA)), and a self-test on first use agrees with the
//     float32 reference; any failure disables it with a reason (AMXStatus).
//   - "avx512bf16": AVX512_BF16's VDPBF16PS on 12x32 register tiles (also
//     bytes). On one Zen 5 core it runs 1.8x float32 FMA's rate; on the
//     Xeons measured, about half of it; and its packing costs more than it
//     saves on products of few columns: hence the calibration.
//   - "widen": the operands widened to float32 (exactly) and multiplied by
//     internal/sgemm: the path of every other machine and of the purego
//     build.
//
// Gemm takes bf16 operands; GemmF32 float32 operands holding bf16 values,
// which widen multiplies as they are; GemmMixed either kind for each (the
// bf16 policy's linear layers read some operands as the stored bf16 bits
// and others as their cast up). The three share each shape's path and give
// the same bits on it.
//
// The packed paths pack op(A) and op(B) into panels of bf16 pairs (each
// dword holds the values at depths 2p and 2p+1, the even one in the low
// half; the depth is zero-padded to the kernel's step), so the three
// transposes share one kernel per path. Each kernel's contract, including
// the order in which the products are accumulated and the treatment of
// denormals, is emulated in Go by the tests, which check the driver
// through the emulations on any machine and the real kernels against them
// where the hardware is there.
//
// Beside Gemm it computes the three products of causal attention on one
// (T, T) item of bf16 operands (causal.go: CausalFor, the scores on and
// below the diagonal and the products with a lower-triangular L), on the
// VDPBF16PS kernel, reading a row-major A in place (dotTile12x32s), or on
// widen: calibrated per item size as Gemm's shapes are.
//
// The package owns the bf16 products only: conversions to bf16 belong to
// package precision, the float32 GEMM to internal/sgemm.
package bf16gemm
