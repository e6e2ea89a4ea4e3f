// Package vec holds the float32 loops of the model's elementwise ops and row
// reductions (residual adds, masks' products, bias rows, bias gradients, the
// AdamW update, GELU and its gradient, LayerNorm's row statistics and
// passes, the softmax's exponentials, maximum and dot products) as AVX2
// kernels generated with avo (github.com/mmcloughlin/avo; see asm/), and for
// GELU, the softmax's rows and the column sums AVX-512 ones too, selected at run time with
// golang.org/x/sys/cpu, with pure-Go fallbacks that compute the same thing.
// Go does not vectorise loops, and these ops are memory- or latency-bound
// scalar loops otherwise.
package vec
