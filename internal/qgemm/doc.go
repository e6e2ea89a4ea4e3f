// Package qgemm holds the int8 linear kernels of gptlab's quantized
// inference and the packing of their weights: y = x·Wᵀ for x (M, K)
// float32 row-major, W [N, K] int8 codes with their scales (a linear
// layer's [out, in] weight quantized by package precision), y (M, N)
// float32.
//
// Weights are packed once (NewWeights) into panels of 16 output channels
// in which each dword holds four consecutive codes of one channel, the
// layout of VPDPBUSD and of VPMADDUBSW+VPMADDWD, with the depth zero-padded
// (to a multiple of 16, or of 32 for block32). Besides the codes, a Weights
// keeps only the scales (one per column, or per column and block) and, for
// the u8·s8 kernels, -128·Σ of each column's codes (per block for block32):
// no float32 copy of the matrix.
//
// Two kernels:
//
//   - WeightOnly computes in float32 from int8 storage: at M=1 a GEMV
//     converts the codes to float32 in registers (VPSLLD/VPSRAD,
//     VCVTDQ2PS) and accumulates by FMA, scaling each column's (block's)
//     sum; for M > 1 it dequantizes W straight into the packed panels of
//     B of internal/sgemm's multiply (sgemm.SgemmPackedB), whose result
//     is bitwise Sgemm's on the dequantized matrix.
//   - Dynamic quantizes each row of x at run time with precision's rule
//     (symmetric, one scale per row, round half to even; the vector
//     quantizer gives bitwise precision.QuantizeInt8Vector's codes), forms
//     int8×int8 products accumulated exactly in int32 (per block of 32 for
//     block32) and scales them: y[i,j] = (float32(acc[i,j])·sw[j])·sx[i],
//     or for block32 the float32 sum over blocks b, in order, of
//     float32(acc_b[i,j])·sw_b[j], times sx[i].
//
// The kernels are chosen at run time with golang.org/x/sys/cpu (Kernels
// names them; GPTLAB_QGEMM=go|avx2|avxvnni|avx512vnni forces one; the
// weight-only kernels follow as AVX-512, AVX2+FMA or Go). Dynamic's: AVX-512 VNNI's VPDPBUSD on zmm and AVX-VNNI's VEX VPDPBUSD on ymm
// take unsigned activations, so the codes are stored shifted by +128 and
// the accumulators start at -128·Σ_k W[j,k] (precomputed at packing);
// AVX2 multiplies |a| (VPSIGNB a,a) by w·sign(a) (VPSIGNB w,a) with
// VPMADDUBSW, whose int16 pair sums are then at most 2·127·127 = 32258
// and cannot saturate (|codes| ≤ 127, never -128), and widens them with
// VPMADDWD; the pure-Go kernel serves every other CPU and the `purego`
// build. All kernels give bitwise the same y: the integer sums are exact
// and the float32 epilogue is the same sequence of operations. The
// assembly is generated with avo (asm/, its own module).
//
// Products of at least sgemm.DefaultParallelFlops operations split their
// panels across as many goroutines as sgemm.Threads allows (long-lived
// helpers; a busy one is not waited for); every panel is computed as in a
// serial call, so results do not depend on the split. A warm call
// allocates nothing.
//
// Neither kernel adds a bias: the model's op adds it. The package does
// not quantize weights (package precision does: scales, rounding rule,
// schemes, SQNR) and knows no model (models builds the int8 linear op on
// it).
package qgemm
