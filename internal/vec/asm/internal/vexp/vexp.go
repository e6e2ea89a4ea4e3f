// Package vexp emits the vectorised exp of package vec's AVX2 kernels
// (the GELU's tail and ExpSum) with avo, so that the generators share one
// algorithm: for an argument w,
//
//	n = round(w·log2 e)                  (f = w·log2e + magic holds n in its low mantissa bits)
//	r = (w - n·ln2Hi) - n·ln2Lo          (Cody–Waite: the first FMA is exact)
//	exp(r) - 1 = r·(e1 + r·(e2 + … + r·e6)) on [-ln2/2, ln2/2]
//	2^n = (bits(f) << 23) + 127<<23      (n = -127 gives exactly 0)
//
// The caller keeps n in [-127, 128] (it clamps w): beyond, the exponent
// field wraps. The emitter works on any number of interleaved chains: each
// argument is a slice of one register per chain, and every instruction is
// emitted once per chain before the next, so that independent vectors run
// in lockstep. The constants are whole vectors (8 copies) in the caller's
// table, found by name with a Const.
package vexp

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The algorithm's constants (vec's pure-Go fallbacks hold the same).
const (
	Log2e = 1.442695040888963
	Magic = 0x1.8p23 // w·log2e + Magic rounds w·log2e to an integer in its low mantissa bits
)

var (
	// Ln2Hi is ln 2 rounded to float32; Ln2Lo is the rest.
	Ln2Hi = float32(0.6931471805599453)
	Ln2Lo = float32(-1.9046542e-09)
	// Coeffs are e1..e6 of exp(r)-1 = r·(e1 + r·(e2 + …)), fitted (by
	// asm/gelu/fit.go) for relative error on [-ln2/2, ln2/2].
	Coeffs = [6]float32{1, 0.49999997, 0.1666653, 0.041667774, 0.008367849, 0.001384025}
)

// Named is one 32-bit constant the emitter reads, by name.
type Named struct {
	Name string
	Bits uint32
}

// Constants lists the constants the emitter reads: the caller puts each in
// its table as a whole vector under its name.
func Constants() []Named {
	f := func(name string, v float32) Named { return Named{name, math.Float32bits(v)} }
	cs := []Named{
		f("magic", Magic),
		f("log2e", Log2e),
		f("negLn2Hi", -Ln2Hi),
		f("negLn2Lo", -Ln2Lo),
		{"expBias", 127 << 23},
	}
	for j, v := range Coeffs {
		cs = append(cs, f(fmt.Sprint("e", j+1), v))
	}
	return cs
}

// Const returns the memory of the whole-vector constant name.
type Const func(name string) Mem

// each emits f(i) for every chain i.
func each(chains int, f func(i int)) {
	for i := range chains {
		f(i)
	}
}

// Reduce emits the argument reduction of w (one register per chain): f =
// w·log2e + magic, with n = round(w·log2e) in its low bits (for Pow2);
// scratch = n; w = w - n·ln2Hi (exact). Then, with wlo (the low part of
// the argument w + wlo) given, wlo = wlo - n·ln2Lo and r = w + wlo into w;
// with wlo nil, r = w - n·ln2Lo into w. It returns f (new registers) and r
// (w's registers).
func Reduce(c Const, w, wlo, scratch []reg.VecVirtual) (f, r []reg.VecVirtual) {
	chains := len(w)
	f = make([]reg.VecVirtual, chains)
	each(chains, func(i int) { f[i] = YMM() })
	each(chains, func(i int) { VMOVUPS(c("magic"), f[i]) })
	each(chains, func(i int) { VFMADD231PS(c("log2e"), w[i], f[i]) }) // f = w·log2e + magic
	nf := scratch
	each(chains, func(i int) { VSUBPS(c("magic"), f[i], nf[i]) })
	each(chains, func(i int) { VFMADD231PS(c("negLn2Hi"), nf[i], w[i]) }) // w - nf·ln2Hi, exact
	if wlo == nil {
		each(chains, func(i int) { VFMADD231PS(c("negLn2Lo"), nf[i], w[i]) })
		return f, w
	}
	each(chains, func(i int) { VFMADD231PS(c("negLn2Lo"), nf[i], wlo[i]) }) // wlo - nf·ln2Lo
	each(chains, func(i int) { VADDPS(wlo[i], w[i], w[i]) })
	return f, w
}

// Expm1 returns exp(r)-1 of the reduced argument r in new registers:
// r·(e1 + r·(e2 + … + r·e6)) by Horner's rule.
func Expm1(c Const, r []reg.VecVirtual) []reg.VecVirtual {
	chains := len(r)
	p := make([]reg.VecVirtual, chains)
	each(chains, func(i int) { p[i] = YMM() })
	last := len(Coeffs)
	each(chains, func(i int) { VMOVUPS(c(fmt.Sprint("e", last)), p[i]) })
	for j := last - 1; j >= 1; j-- {
		each(chains, func(i int) { VFMADD213PS(c(fmt.Sprint("e", j)), r[i], p[i]) }) // p = r·p + e_j
	}
	each(chains, func(i int) { VMULPS(r[i], p[i], p[i]) })
	return p
}

// Pow2 turns f (from Reduce) into 2^n in place: (bits(f) << 23) + 127<<23,
// bits(magic) << 23 wrapping to 0.
func Pow2(c Const, f []reg.VecVirtual) {
	chains := len(f)
	each(chains, func(i int) { VPSLLD(Imm(23), f[i], f[i]) })
	each(chains, func(i int) { VPADDD(c("expBias"), f[i], f[i]) })
}
