package sgemm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// TestSgemmPackedB: with a PackB writing what B's own packing writes,
// SgemmPackedB gives bitwise Sgemm's C on every kernel, serial and split
// across goroutines; a PackB that writes one value wrong (the control)
// changes C.
func TestSgemmPackedB(t *testing.T) {
	defer SetKernel(Kernel())
	defer SetThreads(SetThreads(2))
	defer SetParallelFlops(SetParallelFlops(DefaultParallelFlops))
	r := rand.New(rand.NewPCG(3, 4))
	for _, kn := range kernels {
		if err := SetKernel(kn.name); err != nil {
			t.Fatal(err)
		}
		for _, sh := range [][3]int{{64, 512, 128}, {7, 70, 300}, {13, 48, 16}, {1, 24, 5}, {30, 2100, 40}} {
			m, n, k := sh[0], sh[1], sh[2]
			a, b := make([]float32, m*k), make([]float32, k*n)
			for i := range a {
				a[i] = float32(r.NormFloat64())
			}
			for i := range b {
				b[i] = float32(r.NormFloat64())
			}
			src := problem{kern: kn, b: b, ldb: n}
			pack := func(dst []float32, nr, lastW, pc, jc, kb, nb int) { src.packB(dst, nr, lastW, pc, jc, kb, nb) }
			for _, par := range []int{DefaultParallelFlops, 0} {
				SetParallelFlops(par)
				want, got := make([]float32, m*n), make([]float32, m*n)
				Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, want, n)
				SgemmPackedB(m, n, k, a, k, pack, got, n)
				name := fmt.Sprintf("%s %v parallel-threshold %d", kn.name, sh, par)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: SgemmPackedB differs from Sgemm", name)
				}
				wrong := func(dst []float32, nr, lastW, pc, jc, kb, nb int) {
					pack(dst, nr, lastW, pc, jc, kb, nb)
					if jc == 0 && pc == 0 {
						dst[0] += 1
					}
				}
				SgemmPackedB(m, n, k, a, k, wrong, got, n)
				if slices.Equal(got, want) {
					t.Fatalf("%s: a wrong packing leaves C unchanged", name)
				}
			}
		}
	}
}
