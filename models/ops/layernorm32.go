package ops

import (
	"math"

	"gptlab/internal/vec"
)

// The float32 LayerNorm kernels: the float64 reference loops of
// layernorm.go (lnForward, lnBackwardX, lnBackwardW) with each row's
// sums and elementwise passes in vec's vector loops. The statistics are
// still accumulated in float64; only the order of the sums differs from
// the reference.

// lnStats is the mean and 1/sqrt(var+eps) of a row of n values from Σx and
// Σx² (see rowStats).
func lnStats(s, ss float64, n int) (mean, rstd float64) {
	mean = s / float64(n)
	return mean, 1 / math.Sqrt(max(ss/float64(n)-mean*mean, 0)+lnEps)
}

// lnForward32 normalises the rows of x (N, C) into y (which may be x).
func lnForward32(y, x, w, b []float32) {
	C := len(w)
	for r := 0; r+C <= len(x); r += C {
		xr := x[r : r+C]
		s, ss := vec.Moments(xr) // (C)
		mean, rstd := lnStats(s, ss, C)
		vec.LNRow(y[r:r+C], xr, w, b, mean, rstd)
	}
}

// lnBackwardX32 writes dx (N, C) (which may be x or dy) row by row.
func lnBackwardX32(dx, x, w, dy []float32) {
	C := len(w)
	n := float64(C)
	for r := 0; r+C <= len(x); r += C {
		xr, dyr := x[r:r+C], dy[r:r+C] // (C)
		sx, sxx, sg, sgx := vec.LNGradSums(xr, w, dyr)
		mean, rstd := lnStats(sx, sxx, C)
		sgx = rstd * (sgx - mean*sg) / n // mean of g·xhat
		sg /= n
		vec.LNGradXRow(dx[r:r+C], xr, w, dyr, mean, rstd, sg, sgx)
	}
}

// lnRowStats writes the mean and rstd of rows [lo, hi) of x (N, C) into
// stats (2N: mean, rstd a row).
func lnRowStats(stats []float64, x []float32, C, lo, hi int) {
	for r := lo; r < hi; r++ {
		s, ss := vec.Moments(x[r*C : (r+1)*C])
		stats[2*r], stats[2*r+1] = lnStats(s, ss, C)
	}
}

// lnBackwardW32 sums dy*xhat over the rows of (N, C), in row order, for
// columns [c0, c1), in acc (c1-c0), and rounds the sums into dw (C);
// stats holds the rows' means and rstds (lnRowStats). LNGradWAccum's
// vectors and its tail make the same operations, so the sums do not
// depend on where a block of columns starts.
func lnBackwardW32(dw, x, dy []float32, stats, acc []float64, c0, c1 int) {
	C := len(dw)
	clear(acc)
	for r, i := 0, 0; r+C <= len(x); r, i = r+C, i+2 {
		vec.LNGradWAccum(acc, x[r+c0:r+c1], dy[r+c0:r+c1], stats[i], stats[i+1])
	}
	for c, v := range acc {
		dw[c0+c] = float32(v)
	}
}
