// Package precision holds the numerics of reduced-precision training:
// the storage formats (Format: f32, bf16, fp16), scalar and whole-slice
// conversions between float32 and the 16-bit formats (round to nearest,
// ties to even; subnormals kept; overflow to ±Inf or, on request,
// saturating; a NaN stays a quiet NaN of its sign; signed zeros kept),
// the precision policies a training run follows (Policy, ParsePolicy),
// and dynamic loss scaling with the semantics of PyTorch's GradScaler
// (Scaler).
//
// The slice conversions and the gradient checks run vector kernels where
// the CPU has them (F16C's VCVTPS2PH/VCVTPH2PS, AVX-512, AVX512_BF16's
// VCVTNEPS2BF16, AVX2 integer arithmetic), generated with avo (asm/, its
// own module) and chosen at run time with golang.org/x/sys/cpu; every
// kernel gives bitwise the results of the scalar code, and the `purego`
// build tag leaves only the Go code.
//
// The package knows no model, graph or command: it converts numbers,
// names policies and keeps a loss scale. Casting a graph's tensors,
// planning 16-bit buffers and the training loop belong to the packages
// that use it.
package precision
