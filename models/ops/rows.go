package ops

import "gptlab/internal/vec"

// Plain-slice forms of the float32 kernels, for code that runs the GPT
// without a graph (models' paged forward): the same arithmetic the ops'
// kernels perform, on caller-owned rows.

// LayerNormRows normalises the rows of x (N, C) into y (which may be x)
// with the affine w, b (C), eps 1e-5: LayerNorm's float32 kernel.
func LayerNormRows(y, x, w, b []float32) { lnForward32(y, x, w, b) }

// SoftmaxPrefix writes into y[:n] the softmax of sc·s[:n] (sc > 0) and
// zeroes y[n:]: one query's row of CausalSoftmax, over the n keys it sees.
func SoftmaxPrefix(y, s []float32, n int, sc float32) { softmaxPrefix32(y, s, n, sc) }

// GELURows is the exact GELU of x into y (which may be x): GELU's kernel.
func GELURows(y, x []float32) { vec.GELU(y, x) }
