package pgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
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

// TestMul holds the Go emulation to a float64 product, for every row
// count and ragged widths, and every set of assembly that runs here (and
// Mul's) to the emulation bit for bit: each element is one FMA chain in
// the same order whichever kernel computes it.
func TestMul(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range []struct{ m, out, in int }{
		{1, 32, 1}, {1, 65, 128}, {1, 128, 128}, {1, 224, 5}, {1, 512, 128}, {2, 160, 9}, {3, 384, 128},
		{8, 128, 512}, {9, 40, 7}, {17, 96, 33}, {64, 512, 128},
	} {
		t.Run(fmt.Sprintf("%dx%dx%d", sh.m, sh.out, sh.in), func(t *testing.T) {
			w, x := randSlice(r, sh.out*sh.in), randSlice(r, sh.m*sh.in)
			p, err := Pack(w, sh.out, sh.in)
			if err != nil {
				t.Fatal(err)
			}
			want := reference(w, x, sh.m, sh.out, sh.in)
			tol := 1e-5 * math.Sqrt(float64(sh.in))
			emu := make([]float32, sh.m*sh.out)
			p.mul(&goKernels, emu, x, sh.m)
			for i, v := range emu {
				if d := math.Abs(float64(v) - want[i]); d > tol {
					t.Fatalf("go: element %d is %g, want %g", i, v, want[i])
				}
			}
			got := make([]float32, sh.m*sh.out)
			if Available() {
				p.Mul(got, x, sh.m)
				if i := bitsDiffer(got, emu); i >= 0 {
					t.Fatalf("%s: element %d is %g, emulation %g", Kernel(), i, got[i], emu[i])
				}
			}
			if len(asmSets()) == 0 {
				t.Skip("no AVX-512 or AVX2+FMA: the assembly is not run here")
			}
			for _, set := range asmSets() {
				clear(got)
				p.mul(set.ks, got, x, sh.m)
				if i := bitsDiffer(got, emu); i >= 0 {
					t.Fatalf("%s: element %d is %g, emulation %g", set.name, i, got[i], emu[i])
				}
			}
		})
	}
	if _, err := Pack(make([]float32, 5), 2, 3); err == nil {
		t.Fatal("Pack accepted 5 weights for [2, 3]")
	}
}

// bitsDiffer is the first index where a and b differ in bits, or -1.
func bitsDiffer(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestTile holds Tile to a float64 product and every set of assembly
// that runs here to the emulation bit for bit.
func TestTile(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ m, k, lda, ldc int }{{1, 32, 32, 32}, {5, 16, 40, 48}, {13, 7, 9, 32}, {20, 33, 35, 37}} {
		a, panel := randSlice(r, (sh.m-1)*sh.lda+sh.k), randSlice(r, sh.k*nr)
		c := make([]float32, (sh.m-1)*sh.ldc+nr)
		Tile(c, sh.ldc, a, sh.lda, sh.m, sh.k, panel)
		emu := make([]float32, len(c))
		tile(&goKernels, emu, sh.ldc, a, sh.lda, sh.m, sh.k, panel)
		for _, set := range asmSets() {
			got := make([]float32, len(c))
			tile(set.ks, got, sh.ldc, a, sh.lda, sh.m, sh.k, panel)
			if i := bitsDiffer(got, emu); i >= 0 {
				t.Fatalf("%+v: %s: element %d is %g, emulation %g", sh, set.name, i, got[i], emu[i])
			}
		}
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

// TestRows holds Rows' Go emulation to a float64 reference and Rows and
// every set of assembly that runs here to the emulation bit for bit (the
// same FMA chain), for every row count up to past one call, both widths,
// accumulating or not; a negative control checks that the reference
// tells a row read against another row's panel.
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
					asm := slices.Clone(c0)
					Rows(asm, sh.ldc, a, sh.lda, b, sh.bstride, sh.m, sh.k, w, acc)
					if i := bitsDiffer(asm, emu); i >= 0 {
						t.Fatalf("Rows: element %d is %g, emulation %g", i, asm[i], emu[i])
					}
					if len(asmSets()) == 0 {
						t.Skip("no AVX-512 or AVX2+FMA: the assembly is not run here")
					}
					for _, set := range asmSets() {
						asm := slices.Clone(c0)
						rows(set.ks, asm, sh.ldc, a, sh.lda, b, sh.bstride, sh.m, sh.k, w, acc)
						if i := bitsDiffer(asm, emu); i >= 0 {
							t.Fatalf("%s: element %d is %g, emulation %g", set.name, i, asm[i], emu[i])
						}
					}
				})
			}
		}
	}
}

// kernelCase is one kernel of a set and the contract it holds to.
type kernelCase struct {
	name   string
	m      int // rows
	panels int // a tile kernel's panels; 0 for Rows' kernels
	w      int // a Rows kernel's columns
	acc    bool
	f      kernelFunc
}

// kernelCases lists every kernel of ks: of one panel and wide by rows,
// and Rows' by rows, width and acc.
func kernelCases(ks *kernelSet) []kernelCase {
	var cs []kernelCase
	for m := 1; m <= maxRows; m++ {
		cs = append(cs, kernelCase{name: fmt.Sprintf("m%dp1", m), m: m, panels: 1, f: ks.one[m-1]})
		if wk := ks.wide[m-1]; wk.panels > 0 {
			cs = append(cs, kernelCase{name: fmt.Sprintf("m%dp%d", m, wk.panels), m: m, panels: wk.panels, f: wk.f})
		}
		for v := range nr / half {
			for acc := range 2 {
				c := kernelCase{name: fmt.Sprintf("rows_m%dw%d", m, half*(v+1)), m: m, w: half * (v + 1), acc: acc == 1, f: ks.rows[m-1][v][acc]}
				if c.acc {
					c.name += "acc"
				}
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// groupedGo is the emulation's kernels run as the AVX2 set runs its
// assembly: in groups of up to three rows of a panel, and for Rows of up
// to seven rows of 16 columns or three of 32.
func groupedGo() *kernelSet {
	ks := goKernels
	for m := 1; m <= maxRows; m++ {
		ks.one[m-1] = groupRows(goKernels.one[:3], m, false)
		for v, most := range []int{7, 3} {
			for acc := range 2 {
				fs := make([]kernelFunc, most)
				for r := range fs {
					fs[r] = goKernels.rows[r][v][acc]
				}
				ks.rows[m-1][v][acc] = groupRows(fs, m, true)
			}
		}
	}
	return &ks
}

// TestKernels holds every kernel of every set of assembly that runs here
// (each row count, panel count, Rows width and acc, and the kernels that
// run groups of rows) to the Go emulation of its contract bit for bit, on
// ragged strides and depths of 1, small and odd, and large, with C's gaps
// between rows and a tail after it left as they were. groupRows over the
// emulation's own kernels runs everywhere.
func TestKernels(t *testing.T) {
	sets := append([]namedSet{{"go-grouped", groupedGo()}}, asmSets()...)
	r := rand.New(rand.NewPCG(9, 10))
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			for _, c := range kernelCases(set.ks) {
				if c.f == nil {
					t.Fatalf("%s: no kernel", c.name)
				}
				for _, k := range []int{1, 3, 17, 128, 515} {
					lda := k + 3
					bs, cols := k*nr+8, c.panels*nr // B's stride, C's columns
					bn := (c.panels-1)*bs + k*nr
					if c.panels == 0 {
						bs, cols = k*nr+5, c.w
						bn = (c.m-1)*bs + (k-1)*nr + c.w
					}
					ldc := cols + 5
					a, b := randSlice(r, (c.m-1)*lda+k), randSlice(r, bn)
					c0 := randSlice(r, (c.m-1)*ldc+cols+11)
					want, got := slices.Clone(c0), slices.Clone(c0)
					if c.panels > 0 {
						kernelGo(c.m, c.panels, k, &a[0], lda, &b[0], bs, &want[0], ldc)
					} else {
						rowsGo(c.m, c.w, c.acc, k, &a[0], lda, &b[0], bs, &want[0], ldc)
					}
					c.f(k, &a[0], lda, &b[0], bs, &got[0], ldc)
					if i := bitsDiffer(got, want); i >= 0 {
						t.Fatalf("%s, k %d: element %d (row %d, column %d) is %g, emulation %g (was %g)",
							c.name, k, i, i/ldc, i%ldc, got[i], want[i], c0[i])
					}
				}
			}
		})
	}
	if len(sets) == 1 {
		t.Run("assembly", func(t *testing.T) { t.Skip("no AVX-512 or AVX2+FMA: the assembly is not run here") })
	}
}

// TestAVX2Registers reads the generated assembly: an AVX2 kernel may use
// only what AVX2 encodes, YMM registers Y0-Y15 (avo's allocator would hand
// out Y16-Y31, which only EVEX encodes, past 16 live vectors) and no ZMM
// or mask registers, and requires no AVX-512 extension.
func TestAVX2Registers(t *testing.T) {
	src, err := os.ReadFile("kernel_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`\b(Y(1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[1-7])\b`)
	n := 0
	for _, fn := range strings.Split(string(src), "\n// func ")[1:] {
		name, _, _ := strings.Cut(fn, "(")
		if !strings.Contains(name, "AVX2") {
			continue
		}
		n++
		if strings.Contains(fn, "AVX512") {
			t.Errorf("%s requires AVX-512", name)
		}
		if r := bad.FindString(fn); r != "" {
			t.Errorf("%s uses %s, which AVX2 does not encode", name, r)
		}
	}
	if n == 0 {
		t.Fatal("no AVX2 kernel in kernel_amd64.s")
	}
}
