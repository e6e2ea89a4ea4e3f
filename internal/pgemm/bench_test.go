package pgemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/internal/testutil"
)

// gflops reports flops per call as GFLOP/s.
func gflops(b *testing.B, flops int) {
	b.ReportMetric(float64(flops)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkMul times Packed.Mul on the baby model's decode shapes (W of
// c_attn, c_proj, c_fc, mlp's c_proj and the head; x of 1, 8 and 32 rows)
// against what runs without the kernels: sgemm's Sgemm of the same
// operands, x·Wᵀ with W read as it is (models' pagedLinear fallback), on
// as many threads as it takes (products from 4 MFLOP use all cores;
// Packed.Mul uses one) and on one.
func BenchmarkMul(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	r := rand.New(rand.NewPCG(1, 2))
	for _, w := range []struct{ out, in int }{{384, 128}, {128, 128}, {512, 128}, {128, 512}, {65, 128}} {
		W := randSlice(r, w.out*w.in)
		p, err := Pack(W, w.out, w.in)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range []int{1, 8, 32} {
			x, y := randSlice(r, m*w.in), make([]float32, m*w.out)
			flops := 2 * m * w.out * w.in
			name := fmt.Sprintf("W%dx%d/m%d", w.out, w.in, m)
			b.Run(name+"/pgemm", func(b *testing.B) {
				if !Available() {
					b.Skip("no AVX-512 or AVX2+FMA")
				}
				b.ReportAllocs()
				for range b.N {
					p.Mul(y, x, m)
				}
				gflops(b, flops)
			})
			for _, threads := range []int{0, 1} {
				b.Run(name+[]string{"/sgemm", "/sgemm-1thread"}[threads], func(b *testing.B) {
					defer sgemm.SetThreads(sgemm.SetThreads(threads))
					b.ReportAllocs()
					for range b.N {
						sgemm.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, m, w.out, w.in, 1, x, w.in, W, w.in, 0, y, w.out)
					}
					gflops(b, flops)
				})
			}
		}
	}
}

// BenchmarkRows times Rows on the baby model's decode attention (4 heads
// of 32, blocks of 16 tokens): the query against a block's keys (16
// columns, depth 32) and the probabilities against its values (32
// columns, depth 16, accumulating), with the kernels and in the Go
// emulation.
func BenchmarkRows(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	r := rand.New(rand.NewPCG(3, 4))
	const H = 4
	for _, sh := range []struct {
		name string
		k, w int
		acc  bool
	}{{"keys", 32, 16, false}, {"values", 16, 32, true}} {
		bs := sh.k * nr
		a, bm, c := randSlice(r, H*sh.k), randSlice(r, H*bs), make([]float32, H*sh.w)
		for _, set := range benchSets() {
			b.Run(sh.name+"/"+set.name, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					rows(set.ks, c, sh.w, a, sh.k, bm, bs, H, sh.k, sh.w, sh.acc)
				}
				gflops(b, 2*H*sh.k*sh.w)
			})
		}
	}
}

// BenchmarkTile times Tile on a prefill's attention (8 and 32 rows
// against a panel of keys of depth 32), with the kernels and in the Go
// emulation.
func BenchmarkTile(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	r := rand.New(rand.NewPCG(5, 6))
	const k = 32
	panel := randSlice(r, k*nr)
	for _, m := range []int{8, 32} {
		a, c := randSlice(r, m*k), make([]float32, m*nr)
		for _, set := range benchSets() {
			b.Run(fmt.Sprintf("m%d/%s", m, set.name), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					tile(set.ks, c, nr, a, k, m, k, panel)
				}
				gflops(b, 2*m*k*nr)
			})
		}
	}
}

// benchSets are the kernels in use (if any) and the Go emulation.
func benchSets() []namedSet {
	s := []namedSet{{"go", &goKernels}}
	if Available() {
		s = append([]namedSet{{Kernel(), kernels}}, s...)
	}
	return s
}
