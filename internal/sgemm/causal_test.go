package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// causalWant is the float64 product a causal kind computes on t rows, and
// each element's Σ|terms| (the scale of its rounding error).
func causalWant(kind causalKind, t, n int, a, b []float32) (want, mag []float64, cw int) {
	cw = n
	if kind == causalABt {
		cw = t
	}
	want, mag = make([]float64, t*cw), make([]float64, t*cw)
	for i := range t {
		for j := range cw {
			var s, m float64
			switch kind {
			case causalABt:
				if j > i {
					continue
				}
				for p := range n {
					v := float64(a[i*n+p]) * float64(b[j*n+p])
					s, m = s+v, m+math.Abs(v)
				}
			case causalLB:
				for q := 0; q <= i; q++ {
					v := float64(a[i*t+q]) * float64(b[q*n+j])
					s, m = s+v, m+math.Abs(v)
				}
			case causalLtB:
				for q := i; q < t; q++ {
					v := float64(a[q*t+i]) * float64(b[q*n+j])
					s, m = s+v, m+math.Abs(v)
				}
			}
			want[i*cw+j], mag[i*cw+j] = s, m
		}
	}
	return want, mag, cw
}

// TestCausal runs the three causal products on every kernel (the AVX-512
// family emulated where the CPU lacks it) against float64 sums: L's upper
// triangle holds zeros to the end of each row's panel (what a full panel
// reads in place) and NaN past it, which any read would spread; ABt
// leaves C alone past each row panel; rows in blocks of MaxRowPanel
// give the whole call's bits; and B read in place (with a row stride past
// its width) gives the bits of B packed.
func TestCausal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	const sentinel = 12345
	for _, kn := range append(kernels[:len(kernels):len(kernels)], emuKernel512()) {
		if MaxRowPanel%kn.mr != 0 {
			t.Errorf("%s kernel: MaxRowPanel %d is not a multiple of its mr %d", kn.name, MaxRowPanel, kn.mr)
		}
		for _, T := range []int{1, 5, 12, 13, 48, 64, 100, 257} {
			for _, n := range []int{1, 7, 32, 33} {
				for _, kind := range []causalKind{causalABt, causalLB, causalLtB} {
					name := fmt.Sprintf("%s kind %d T %d n %d", kn.name, kind, T, n)
					var a []float32
					if kind == causalABt {
						a = rnd(T * n)
					} else {
						a = rnd(T * T)
						for i := range T {
							for j := i + 1; j < T; j++ {
								a[i*T+j] = float32(math.NaN())
								if (kind == causalLB && j < (i/kn.mr+1)*kn.mr) || (kind == causalLtB && i >= j/kn.mr*kn.mr) {
									a[i*T+j] = 0 // in the diagonal block of j's (LtB) or i's (LB) panel
								}
							}
						}
					}
					lda := len(a) / T
					b := rnd(T * n)
					want, mag, cw := causalWant(kind, T, n, a, b)
					c := make([]float32, T*cw)
					for i := range c {
						c[i] = sentinel
					}
					// B with a row stride past its width, as the heads in place have
					ldb := n + 3
					bs := make([]float32, T*ldb)
					for i := range T {
						copy(bs[i*ldb:], b[i*n:(i+1)*n])
					}
					causal(kn, kind, 0, T, n, a, lda, bs, ldb, c, cw)
					packed := slices.Clone(c) // the same with B packed: the same bits
					readB = readBNever
					causal(kn, kind, 0, T, n, a, lda, bs, ldb, packed, cw)
					readB = readBByRule
					if i := firstDiff(packed, c); i >= 0 {
						t.Fatalf("%s: C[%d] = %v with B read in place, %v with B packed", name, i, c[i], packed[i])
					}
					for i := range T {
						end := cw // ABt: the row's panel end
						if kind == causalABt {
							end = min(T, (i/kn.mr+1)*kn.mr)
						}
						for j := range cw {
							got := float64(c[i*cw+j])
							switch {
							case kind == causalABt && j >= end:
								if got != sentinel {
									t.Fatalf("%s: C[%d][%d] = %v past the row panel's end %d, want it untouched", name, i, j, got, end)
								}
							case kind == causalABt && j > i:
							case !(math.Abs(got-want[i*cw+j]) <= 1e-5*mag[i*cw+j]+1e-30):
								t.Fatalf("%s: C[%d][%d] = %v, want %v", name, i, j, got, want[i*cw+j])
							}
						}
					}
					if kind == causalLtB {
						continue
					}
					blocks := make([]float32, len(c))
					for r0 := 0; r0 < T; r0 += 2 * MaxRowPanel {
						r1 := min(r0+2*MaxRowPanel, T)
						causal(kn, kind, r0, r1, n, a[r0*lda:], lda, b, n, blocks[r0*cw:], cw)
					}
					for i := range T {
						w := cw // LB: the whole row; ABt: on and below the diagonal
						if kind == causalABt {
							w = i + 1
						}
						if got, whole := blocks[i*cw:i*cw+w], c[i*cw:i*cw+w]; !slices.Equal(got, whole) {
							t.Fatalf("%s: rows by blocks of %d: row %d is %v, the whole call's %v", name, 2*MaxRowPanel, i, got, whole)
						}
					}
				}
			}
		}
	}
}

// TestCausalCatchesError is TestCausal's negative control: LB reading an
// entry above L's diagonal past the diagonal block (the test's NaN), or
// missing one below it, must show.
func TestCausalCatchesError(t *testing.T) {
	const T, n = 40, 4
	l, b := make([]float32, T*T), make([]float32, T*n)
	for i := range b {
		b[i] = 1
	}
	l[2*T+30] = float32(math.NaN()) // above the diagonal, past every row panel's block: never read
	c := make([]float32, T*n)
	LowerLB(0, T, n, l, T, b, n, c, n)
	if slices.ContainsFunc(c, func(v float32) bool { return v != v }) {
		t.Fatal("LowerLB read an entry above L's diagonal past its row panel")
	}
	l[5*T+2] = float32(math.NaN()) // below it: read
	LowerLB(0, T, n, l, T, b, n, c, n)
	if !slices.ContainsFunc(c, func(v float32) bool { return v != v }) {
		t.Fatal("LowerLB ignored an entry below L's diagonal")
	}
}

// ExampleLowerLB: row i of L·B sums B's rows up to i, weighted by L's row
// i; L is zero above its diagonal.
func ExampleLowerLB() {
	l := []float32{
		1, 0, 0,
		1, 1, 0,
		1, 1, 1,
	}
	b := []float32{1, 10, 100}
	c := make([]float32, 3)
	LowerLB(0, 3, 1, l, 3, b, 1, c, 1)
	fmt.Println(c)
	// Output: [1 11 111]
}
