// Package bf16gemm multiplies bfloat16 matrices with float32 accumulation:
// C(f32) = op(A)·op(B) for row-major A and B held as bf16 bits ([]uint16),
// in the forms the GPT's linear layers and attention run (A·Bᵀ, A·B, Aᵀ·B,
// as internal/sgemm's Sgemm takes them), for the measured precision
// optimization of mixed-precision training.
//
// It has three paths, chosen at run time (see Path):
//
//   - "amx": AMX-BF16's TDPBF16PS on 16x16 tiles, a 32x32 block of C per
//     kernel call. Go's assembler has no AMX mnemonics: the instructions
//     are bytes (asm/, avo). It is used only where the CPU reports AMX-TILE
//     and AMX-BF16, the OS enables the tile state in XCR0 and grants this
//     process the tile data (arch_prctl(ARCH_REQ_XCOMP_PERM,
//     XFEATURE_XTILEDATA)), and a self-test on first use agrees with the
//     float32 reference; any failure disables it with a reason (AMXStatus).
//     GPTLAB_BF16=off disables it too.
//   - "avx512bf16": AVX512_BF16's VDPBF16PS on 12x32 register tiles (also
//     bytes). It is correct everywhere it runs, but on the Xeon this was
//     written on it is slower than internal/sgemm's float32 AVX-512 kernel
//     (see the README's figures); callers use it only where a measurement
//     shows it faster.
//   - "widen": the operands widened to float32 (exactly) and multiplied by
//     internal/sgemm: the path of every other machine and of the purego
//     build.
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
// The package owns the bf16 product only: conversions to bf16 belong to
// package precision, the float32 GEMM to internal/sgemm.
package bf16gemm
