package pgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// TestRows holds Rows' Go emulation to a float64 reference and, where it
// runs, the assembly to the emulation bit for bit (the same FMA chain),
// for every row count up to past one call, both widths, accumulating or
// not; a negative control checks that the reference tells a row read
// against another row's panel.
func TestRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range []struct{ m, k, lda, bstride, ldc int }{
		{1, 1, 1, 32, 16}, {2, 16, 32, 1024, 32}, {3, 7, 9, 7 * 32, 40}, {4, 32, 32, 1024, 32},
		{5, 16, 80, 600, 33}, {8, 5, 5, 160, 32}, {11, 32, 40, 1100, 48},
	} {
		for _, w := range []int{16, 32} {
			for _, acc := range []bool{false, true} {
				t.Run(fmt.Sprintf("m%d_k%d_w%d_acc%v", sh.m, sh.k, w, acc), func(t *testing.T) {
					a := randSlice(r, (sh.m-1)*sh.lda+sh.k)
					b := randSlice(r, (sh.m-1)*sh.bstride+(sh.k-1)*nr+w)
					c0 := randSlice(r, (sh.m-1)*sh.ldc+w)
					want := func(bstride int) []float64 {
						y := make([]float64, len(c0))
						for i := range sh.m {
							for j := range w {
								var s float64
								if acc {
									s = float64(c0[i*sh.ldc+j])
								}
								for p := range sh.k {
									s += float64(a[i*sh.lda+p]) * float64(b[i*bstride+p*nr+j])
								}
								y[i*sh.ldc+j] = s
							}
						}
						return y
					}
					near := func(got []float32, want []float64) error {
						for i := range sh.m {
							for j := range w {
								e := i*sh.ldc + j
								if d := math.Abs(float64(got[e]) - want[e]); d > 1e-5*math.Sqrt(float64(sh.k+1)) {
									return fmt.Errorf("C[%d,%d] = %g, want %g", i, j, got[e], want[e])
								}
							}
						}
						return nil
					}
					emu := slices.Clone(c0)
					rows(&goKernels, emu, sh.ldc, a, sh.lda, b, sh.bstride, sh.m, sh.k, w, acc)
					if err := near(emu, want(sh.bstride)); err != nil {
						t.Fatal("go: ", err)
					}
					if sh.m > 1 && near(emu, want(0)) == nil {
						t.Fatal("negative control: every row read against the first panel matched too")
					}
					for e := range emu { // the columns past w and the rows' gaps are left alone
						if e%sh.ldc >= w && emu[e] != c0[e] {
							t.Fatalf("element %d outside the %d columns written: %g, was %g", e, w, emu[e], c0[e])
						}
					}
					if !Available() {
						t.Skip("no AVX-512: the assembly is not run here")
					}
					asm := slices.Clone(c0)
					Rows(asm, sh.ldc, a, sh.lda, b, sh.bstride, sh.m, sh.k, w, acc)
					if !slices.Equal(asm, emu) {
						t.Fatalf("assembly %v, emulation %v", asm, emu)
					}
				})
			}
		}
	}
}
