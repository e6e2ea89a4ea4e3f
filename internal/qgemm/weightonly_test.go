package qgemm

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// TestWeightOnlyIsSgemm: for M > 1 WeightOnly is bitwise Sgemm on the
// dequantized matrix, on every kernel and sgemm kernel, serial and split
// across goroutines (the codes are dequantized straight into sgemm's
// packed panels, and those must be the panels Sgemm packs itself).
func TestWeightOnlyIsSgemm(t *testing.T) {
	defer sgemm.SetKernel(sgemm.Kernel())
	defer sgemm.SetThreads(sgemm.SetThreads(2))
	defer sgemm.SetParallelFlops(sgemm.SetParallelFlops(sgemm.DefaultParallelFlops))
	for _, sk := range []string{"avx512", "avx2", "go"} {
		if sgemm.SetKernel(sk) != nil {
			continue
		}
		for _, k := range kernels {
			for _, sc := range schemes {
				for _, sh := range append(shapes, shape{64, 520, 300}, shape{13, 2100, 40}) {
					if sh.m < 2 {
						continue
					}
					p := newProblem(t, sh, sc, 31)
					deq := make([]float32, sh.n*sh.k)
					precision.DequantizeInt8(deq, p.q, p.scales, sh.n, sh.k, sc)
					for _, par := range []int{sgemm.DefaultParallelFlops, 0} {
						sgemm.SetParallelFlops(par)
						got, want := make([]float32, sh.m*sh.n), make([]float32, sh.m*sh.n)
						weightOnly(k, got, p.x, sh.m, p.w)
						sgemm.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, sh.m, sh.n, sh.k, 1, p.x, sh.k, deq, sh.k, 0, want, sh.n)
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s", fmt.Sprintf("sgemm %s, %s %v %v, parallel-threshold %d: y[%d] = %g, Sgemm %g", sk, k.name, sc, sh, par, i, got[i], want[i]))
						}
					}
				}
			}
		}
	}
}
