package qgemm

import (
	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
)

// panelBytes bounds the float32 scratch of one dequantized panel of W.
const panelBytes = 128 << 10

// WeightOnly computes y = x·Wᵀ in float32: x (m, K) row-major, y (m, N)
// overwritten. W is dequantized a panel of columns at a time (as many
// whole 16-column panels as fit in 128 KiB of float32, at least one) into a
// scratch, [columns, K] row-major, which internal/sgemm's Sgemm multiplies
// (x · panelᵀ) straight into y's columns. It panics on bad lengths. A warm
// call allocates nothing.
func WeightOnly(y, x []float32, m int, w *Weights) {
	checkArgs("WeightOnly", y, x, m, w)
	if m == 0 {
		return
	}
	nc := max(panelBytes/4/w.k/panelW, 1) * panelW
	s := getScratch()
	s.grow(0, 0, nc*w.k)
	for j0 := 0; j0 < w.n; j0 += nc {
		jn := min(nc, w.n-j0)
		wf := s.wf[:jn*w.k]
		w.dequantize(wf, j0, jn)
		sgemm.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, m, jn, w.k, 1, x, w.k, wf, w.k, 0, y[j0:], w.n)
	}
	putScratch(s)
}

// dequantize writes columns j0..j0+jn of W, dequantized, into dst as a
// [jn, K] row-major matrix: dst[c·K + k] = float32(code)·scale. j0 is a
// multiple of 16.
func (w *Weights) dequantize(dst []float32, j0, jn int) {
	dequantGo(w, dst, j0, jn)
}

func dequantGo(w *Weights, dst []float32, j0, jn int) {
	for c := range jn {
		j := j0 + c
		row := dst[c*w.k : (c+1)*w.k]
		for kk := range row {
			row[kk] = float32(w.code(j, kk)) * w.scale(j, kk)
		}
	}
}
