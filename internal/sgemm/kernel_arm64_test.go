//go:build arm64 && !purego

package sgemm

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"gptlab/internal/testutil"
)

// fma32 is a·b + c rounded once to float32 (to nearest, ties to even), as
// FMLA computes it: the exact value in a big.Float, then one rounding.
func fma32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(1024).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// neonContract is the NEON kernel's contract, in Go: for each element of
// the 8×8 tile, s = fma(A(i,p), B(p,j), s) for p = 0, 1, ..., k-1 from
// s = 0; then C = s·alpha (one rounding), or with acc C = fma(s, alpha, C).
// fused turns the fused multiply-adds into a product and a sum, each
// rounded (the negative control).
func neonContract(k int, a, b, c []float32, ldc int, alpha float32, acc, fused bool) {
	for i := range 8 {
		for j := range 8 {
			var s float32
			for p := range k {
				if fused {
					s = fma32(a[p*8+i], b[p*8+j], s)
				} else {
					s += float32(a[p*8+i] * b[p*8+j])
				}
			}
			switch {
			case !acc:
				c[i*ldc+j] = s * alpha
			case fused:
				c[i*ldc+j] = fma32(s, alpha, c[i*ldc+j])
			default:
				c[i*ldc+j] += float32(s * alpha)
			}
		}
	}
}

// The NEON microkernel gives its contract's bits (neonContract) on every
// depth, both accumulation modes, several alphas and a padded C whose
// padding it must not touch. The contract's non-fused variant differs from
// it on these inputs, so the comparison can tell them apart.
func TestNEONKernelBitwise(t *testing.T) {
	if kernels[0].name != "neon" {
		t.Fatalf("kernels[0] = %s on arm64, want neon", kernels[0].name)
	}
	r := rand.New(rand.NewPCG(5, 8))
	unfusedDiffers := 0
	for _, k := range []int{0, 1, 2, 3, 7, 8, 33, 256} {
		for _, acc := range []bool{false, true} {
			for _, alpha := range []float32{1, -1.5, 0.3} {
				for _, ldc := range []int{8, 11} {
					a, b := make([]float32, 8*k), make([]float32, 8*k)
					for i := range a {
						a[i], b[i] = 2*r.Float32()-1, 2*r.Float32()-1
					}
					c := make([]float32, 7*ldc+8+3)
					for i := range c {
						c[i] = sentinel
						if i%ldc < 8 {
							c[i] = 2*r.Float32() - 1
						}
					}
					got, want, unfused := clone(c), clone(c), clone(c)
					var ap, bp *float32
					if k > 0 {
						ap, bp = &a[0], &b[0]
					}
					kernelNEON8x8P(k, ap, 0, bp, &got[0], ldc, alpha, acc)
					neonContract(k, a, b, want, ldc, alpha, acc, true)
					neonContract(k, a, b, unfused, ldc, alpha, acc, false)
					name := fmt.Sprintf("k=%d acc=%v alpha=%v ldc=%d", k, acc, alpha, ldc)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s: C[%d,%d] = %v (%#08x), contract %v (%#08x)", name, i/ldc, i%ldc,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
						if unfused[i] != want[i] {
							unfusedDiffers++
						}
					}
				}
			}
		}
	}
	if unfusedDiffers == 0 {
		t.Fatal("the non-fused contract gives the same bits everywhere: the comparison cannot tell fused from not")
	}
	t.Logf("the non-fused evaluation differs from the contract in %d elements", unfusedDiffers)
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// The NEON kernel's speed, in GFLOP/s. Under user-mode emulation (qemu)
// it skips, saying so: the emulator's time says nothing of an arm64 CPU
// (TestNEONKernelBitwise checks the kernel there).
func BenchmarkNEONKernel(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const k = 256
	a, bp, c := make([]float32, 8*k), make([]float32, 8*k), make([]float32, 64)
	for i := range a {
		a[i], bp[i] = 1, 1
	}
	b.SetBytes(0)
	for b.Loop() {
		kernelNEON8x8P(k, &a[0], 0, &bp[0], &c[0], 8, 1, false)
	}
	b.ReportMetric(float64(2*8*8*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if c[0] != k {
		b.Fatalf("C[0] = %v, want %d", c[0], k)
	}
}
