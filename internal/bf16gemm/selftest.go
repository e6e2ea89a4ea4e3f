package bf16gemm

import (
	"fmt"
	"math"

	"gptlab/precision"
)

// selfTest runs kern through the driver on fixed problems in the three
// forms the GPT uses and returns "" or the first disagreement with the
// reference:
//
//  1. small integers (|a|, |b| <= 8, depth 100): every product and partial
//     sum is exact in float32, so whatever the order of accumulation the
//     result must equal the exact product bit for bit; this checks the
//     data movement (tiles, strides, packing, padding, edges);
//  2. values of mixed sign and magnitude rounded to bf16 (depth 256): each
//     element within the float32 accumulation bound, 2·k·2^-24·Σ|a·b|, of
//     the product computed in float64; this checks the arithmetic.
//
// The AMX path runs it on first use; the tests run it on the emulated
// kernels, and on broken ones as a negative control.
func selfTest(kern *kernel) string {
	forms := []struct{ aT, bT bool }{{false, true}, {false, false}, {true, false}}
	seed := uint32(1)
	next := func() uint32 { // a fixed LCG: the same problems everywhere
		seed = seed*1664525 + 1013904223
		return seed >> 8
	}
	for _, f := range forms {
		for _, integers := range []bool{true, false} {
			m, n, k := 45, 70, 100
			if !integers {
				m, n, k = 64, 64, 256
			}
			val := func() float32 {
				if integers {
					return float32(int(next()%17) - 8)
				}
				v := float32(next())/(1<<24) - 0.5
				return v * float32(math.Ldexp(1, int(next()%9)-4))
			}
			o := testOperands(f.aT, f.bT, m, n, k, val)
			run(kern, o, 1)
			for i := range m {
				for j := range n {
					ref, mag := o.ref(i, j)
					got := float64(o.c[i*o.ldc+j])
					if integers && got != ref || !integers && !(math.Abs(got-ref) <= 2*float64(k)*0x1p-24*mag) {
						return fmt.Sprintf("%s, aT=%v bT=%v, %dx%dx%d: C[%d,%d] = %v, want %v",
							kern.name, f.aT, f.bT, m, n, k, i, j, got, ref)
					}
				}
			}
		}
	}
	return ""
}

// testOperands returns an m×n×k problem in the given form with values from
// val rounded to bf16, row strides a little wider than the matrices, and C
// filled with NaN (every element must be written).
func testOperands(aT, bT bool, m, n, k int, val func() float32) operands {
	o := operands{aT: aT, bT: bT, m: m, n: n, k: k}
	ar, ac := m, k
	if aT {
		ar, ac = k, m
	}
	br, bc := k, n
	if bT {
		br, bc = n, k
	}
	o.lda, o.ldb, o.ldc = ac+3, bc+1, n+2
	fill := func(rows, ld int) []uint16 {
		x := make([]uint16, rows*ld)
		for i := range x {
			x[i] = precision.ToBF16(val())
		}
		return x
	}
	o.a, o.b = fill(ar, o.lda), fill(br, o.ldb)
	o.c = make([]float32, m*o.ldc)
	for i := range o.c {
		o.c[i] = float32(math.NaN())
	}
	return o
}

// at returns op(A)(i, p) and op(B)(p, j) as float64.
func (o operands) at(i, p, j int) (float64, float64) {
	ai, bi := i*o.lda+p, p*o.ldb+j
	if o.aT {
		ai = p*o.lda + i
	}
	if o.bT {
		bi = j*o.ldb + p
	}
	return float64(precision.FromBF16(o.a[ai])), float64(precision.FromBF16(o.b[bi]))
}

// ref returns C(i, j) computed in float64 and Σ|a·b| (the scale of its
// rounding error).
func (o operands) ref(i, j int) (sum, mag float64) {
	for p := range o.k {
		a, b := o.at(i, p, j)
		sum += a * b
		mag += math.Abs(a * b)
	}
	return sum, mag
}
