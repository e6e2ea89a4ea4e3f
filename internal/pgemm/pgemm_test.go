package pgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
)

// reference is y = x·Wᵀ in float64.
func reference(w, x []float32, m, out, in int) []float64 {
	y := make([]float64, m*out)
	for i := range m {
		for o := range out {
			var s float64
			for p := range in {
				s += float64(x[i*in+p]) * float64(w[o*in+p])
			}
			y[i*out+o] = s
		}
	}
	return y
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// TestMul holds the Go emulation and, where it runs, the assembly to a
// float64 product, for every row count and ragged widths; and the
// assembly to the emulation within a few ulps.
func TestMul(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []struct{ m, out, in int }{
		{1, 32, 1}, {1, 65, 128}, {3, 384, 128}, {8, 128, 512}, {9, 40, 7}, {17, 96, 33}, {64, 512, 128},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.out, sh.in), func(t *testing.T) {
			w, x := randSlice(r, sh.out*sh.in), randSlice(r, sh.m*sh.in)
			p, err := Pack(w, sh.out, sh.in)
			if err != nil {
				t.Fatal(err)
			}
			want := reference(w, x, sh.m, sh.out, sh.in)
			tol := 1e-5 * math.Sqrt(float64(sh.in))
			check := func(name string, y []float32) {
				for i, v := range y {
					if d := math.Abs(float64(v) - want[i]); d > tol {
						t.Fatalf("%s: element %d is %g, want %g", name, i, v, want[i])
					}
				}
			}
			emu := make([]float32, sh.m*sh.out)
			p.mul(&goKernels, emu, x, sh.m)
			check("go", emu)
			if !Available() {
				t.Skip("no AVX-512: the assembly is not run here")
			}
			asm := make([]float32, sh.m*sh.out)
			p.Mul(asm, x, sh.m)
			check(Kernel(), asm)
			for i := range asm {
				if d := math.Abs(float64(asm[i] - emu[i])); d > 1e-6*math.Max(1, math.Abs(float64(emu[i]))) {
					t.Fatalf("element %d: assembly %g, emulation %g", i, asm[i], emu[i])
				}
			}
		})
	}
	if _, err := Pack(make([]float32, 5), 2, 3); err == nil {
		t.Fatal("Pack accepted 5 weights for [2, 3]")
	}
}

func BenchmarkMul(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	if !Available() {
		b.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range []int{1, 8, 32, 64} {
		const out, in = 384, 128
		p, _ := Pack(randSlice(r, out*in), out, in)
		x, y := randSlice(r, m*in), make([]float32, m*out)
		b.Run(fmt.Sprintf("m%d", m), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				p.Mul(y, x, m)
			}
			b.ReportMetric(2*float64(m*out*in)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func TestTile(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ m, k, lda, ldc int }{{1, 32, 32, 32}, {5, 16, 40, 48}, {13, 7, 9, 32}} {
		a, panel := randSlice(r, (sh.m-1)*sh.lda+sh.k), randSlice(r, sh.k*nr)
		c := make([]float32, (sh.m-1)*sh.ldc+nr)
		Tile(c, sh.ldc, a, sh.lda, sh.m, sh.k, panel)
		for i := range sh.m {
			for j := range nr {
				var want float64
				for p := range sh.k {
					want += float64(a[i*sh.lda+p]) * float64(panel[p*nr+j])
				}
				if d := math.Abs(float64(c[i*sh.ldc+j]) - want); d > 1e-5 {
					t.Fatalf("%+v: C[%d,%d] = %g, want %g", sh, i, j, c[i*sh.ldc+j], want)
				}
			}
		}
	}
}
