// Package vexp emits the vectorised exp of package vec's AVX2 and AVX-512
// kernels (the GELU's tail and ExpSum) with avo, so that the generators share one
// algorithm: for an argument w,
//
//	n = round(w·log2 e)                  (f = w·log2e + magic holds n in its low mantissa bits)
//	r = (w - n·ln2Hi) - n·ln2Lo          (Cody–Waite: the first FMA is exact)
//	exp(r) - 1 = r·(e1 + r·(e2 + … + r·e6)) on [-ln2/2, ln2/2]
//	2^n = (bits(f) << 23) + 127<<23      (n = -127 gives exactly 0)
//
// The caller keeps n in [-127, 128] (it clamps w): beyond, the exponent
// field wraps. The registers may be YMM or ZMM (AVX-512): on ZMM every
// constant is broadcast from the first of its copies in the table. The
// emitter works on any number of interleaved chains: each
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

// wide reports whether r is a ZMM register.
func wide(r reg.VecVirtual) bool { return r.Size() == 64 }

// like returns a new register of r's width.
func like(r reg.VecVirtual) reg.VecVirtual {
	if wide(r) {
		return ZMM()
	}
	return YMM()
}

// The instructions that read a constant m: the whole vector on YMM, its
// first copy broadcast on ZMM.
func load(m Mem, r reg.VecVirtual) {
	if wide(r) {
		VBROADCASTSS(m, r)
	} else {
		VMOVUPS(m, r)
	}
}

// constOp is the instruction that reads the constant m: plain on YMM,
// its broadcast form on ZMM.
func constOp(plain, bcst func(...Op)) func(m Mem, a, d reg.VecVirtual) {
	return func(m Mem, a, d reg.VecVirtual) {
		if wide(d) {
			bcst(m, a, d)
		} else {
			plain(m, a, d)
		}
	}
}

var (
	fmadd231 = constOp(VFMADD231PS, VFMADD231PS_BCST)
	fmadd213 = constOp(VFMADD213PS, VFMADD213PS_BCST)
	sub      = constOp(VSUBPS, VSUBPS_BCST)
	paddd    = constOp(VPADDD, VPADDD_BCST)
)

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
	each(chains, func(i int) { f[i] = like(w[i]) })
	each(chains, func(i int) { load(c("magic"), f[i]) })
	each(chains, func(i int) { fmadd231(c("log2e"), w[i], f[i]) }) // f = w·log2e + magic
	nf := scratch
	each(chains, func(i int) { sub(c("magic"), f[i], nf[i]) })
	each(chains, func(i int) { fmadd231(c("negLn2Hi"), nf[i], w[i]) }) // w - nf·ln2Hi, exact
	if wlo == nil {
		each(chains, func(i int) { fmadd231(c("negLn2Lo"), nf[i], w[i]) })
		return f, w
	}
	each(chains, func(i int) { fmadd231(c("negLn2Lo"), nf[i], wlo[i]) }) // wlo - nf·ln2Lo
	each(chains, func(i int) { VADDPS(wlo[i], w[i], w[i]) })
	return f, w
}

// Expm1 returns exp(r)-1 of the reduced argument r in new registers:
// r·(e1 + r·(e2 + … + r·e6)) by Horner's rule.
func Expm1(c Const, r []reg.VecVirtual) []reg.VecVirtual {
	chains := len(r)
	p := make([]reg.VecVirtual, chains)
	each(chains, func(i int) { p[i] = like(r[i]) })
	last := len(Coeffs)
	each(chains, func(i int) { load(c(fmt.Sprint("e", last)), p[i]) })
	for j := last - 1; j >= 1; j-- {
		each(chains, func(i int) { fmadd213(c(fmt.Sprint("e", j)), r[i], p[i]) }) // p = r·p + e_j
	}
	each(chains, func(i int) { VMULPS(r[i], p[i], p[i]) })
	return p
}

// Pow2 turns f (from Reduce) into 2^n in place: (bits(f) << 23) + 127<<23,
// bits(magic) << 23 wrapping to 0.
func Pow2(c Const, f []reg.VecVirtual) {
	chains := len(f)
	each(chains, func(i int) { VPSLLD(Imm(23), f[i], f[i]) })
	each(chains, func(i int) { paddd(c("expBias"), f[i], f[i]) })
}

// The clamp of ExpSum's argument w (internal/vec/softmax.go holds the
// same): w below ClampLo gives exactly 0 (n = -127 makes 2^n zero), w
// above ClampHi gives +Inf (2^n would need n = 128, although exp stays
// finite up to 88.72).
const (
	ClampLo = -88.0
	ClampHi = 88.37
)

// NewExpTable is a table of the emitter's constants and ExpSum's clamp:
// "lo", "hi" and "inf" (+Inf).
func NewExpTable(symbol string) *ConstTable {
	c := NewConstTable(symbol)
	for _, k := range Constants() {
		c.Add(k.Name, k.Bits)
	}
	c.AddFloat("lo", ClampLo)
	c.AddFloat("hi", ClampHi)
	c.AddFloat("inf", float32(math.Inf(1)))
	return c
}

// Clamped emits ExpSum's exp of one vector of arguments w (clobbered): w
// above hi gives +Inf (big, a vector register on YMM or an opmask on ZMM,
// notes where), w is clamped to [lo, hi] (w itself returned on NaN), and
// e = (exp(r)-1)·2^n + 2^n. lo and hi hold the clamp; inf is +Inf, the
// table's vector on YMM, a register on ZMM. It returns e.
func Clamped(c Const, w, lo, hi reg.VecVirtual, big reg.Register, inf Op) reg.VecVirtual {
	VCMPPS(Imm(0x1e), hi, w, big) // GT_OQ: w > hi
	VMINPS(w, hi, w)
	VMAXPS(w, lo, w)
	scratch := like(w)
	f, r := Reduce(c, []reg.VecVirtual{w}, nil, []reg.VecVirtual{scratch})
	e := Expm1(c, r)[0]
	Pow2(c, f)
	VFMADD213PS(f[0], f[0], e) // e = pm1·2^n + 2^n
	if wide(w) {
		VMOVAPS(inf, big, e)
	} else {
		VBLENDVPS(big, inf, e, e)
	}
	return e
}

// MaxLanes leaves in m's lane 0 the largest of its lanes (YMM or ZMM),
// halving by VMAXPS (m > h ? m : h) down to one lane; the other lanes are
// left undefined.
func MaxLanes(m reg.VecVirtual) {
	h := like(m)
	if wide(m) {
		VEXTRACTF64X4(Imm(1), m, h.AsY())
		VMAXPS(h.AsY(), m.AsY(), m.AsY())
	}
	VEXTRACTF128(Imm(1), m.AsY(), h.AsX())
	VMAXPS(h.AsX(), m.AsX(), m.AsX())
	VMOVHLPS(m.AsX(), m.AsX(), h.AsX())
	VMAXPS(h.AsX(), m.AsX(), m.AsX())
	VMOVSHDUP(m.AsX(), h.AsX())
	VMAXSS(h.AsX(), m.AsX(), m.AsX())
}
