// Command softmax512 generates the AVX-512 kernels of package vec's
// softmax row primitives (ExpSum, Max, Scale, and SoftmaxPrefix, the
// three in one call) with avo
// (github.com/mmcloughlin/avo). `go generate` in internal/vec runs it:
//
//	go run -C asm/softmax512 . -out ../../softmax512_amd64.s -stubs ../../softmax512_amd64_stubs.go -pkg vec
//
// They compute what the AVX2 kernels of asm/softmax compute, to the bit,
// on vectors of 16: the exp is package vexp's on ZMM registers; ExpSum's
// float64 lane sums stay the 8 lanes of j%8, each vector adding its low
// 8 and then its high 8 to them, so every lane sums its elements in the
// order of j. Each kernel takes the whole row: the last partial vector is
// read and written under a mask (AVX-512 suppresses the faults of masked
// lanes), so the Go side copies nothing. They need AVX-512F only.
package main

import (
	"flag"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"gptlab/internal/vec/asm/internal/vexp"
)

// zBytes is the size of one ZMM vector.
const zBytes = 64

func main() {
	flag.Parse()
	ConstraintExpr("amd64,!purego")
	c := vexp.NewExpTable("softmax512const")
	genExpSum(c)
	genMax()
	genScale()
	genSoftmaxPrefix(c)
	c.Emit()
	Generate()
}

// broadcast loads the float32 parameter name into all 16 lanes of a ZMM.
func broadcast(name string) reg.VecVirtual {
	p, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	z := ZMM()
	VBROADCASTSS(p.Addr, z)
	return z
}

// rowLoop emits, for the n elements at the pointers: body(false) once per
// whole vector of 16, each pointer then advanced a vector; then, if n%16
// is not 0, body(true) once with tail holding its n%16 low bits.
func rowLoop(name string, n reg.Register, tail reg.OpmaskVirtual, body func(masked bool), ptrs ...reg.Register) {
	rest := GP64()
	MOVQ(n, rest)
	ANDQ(U32(15), rest)
	SHRQ(Imm(4), n)
	JZ(LabelRef(name + "tail"))
	Label(name + "loop")
	body(false)
	for _, p := range ptrs {
		ADDQ(U32(zBytes), p)
	}
	DECQ(n)
	JNZ(LabelRef(name + "loop"))
	Label(name + "tail")
	TESTQ(rest, rest)
	JZ(LabelRef(name + "done"))
	// tail = (1 << rest) - 1
	MOVQ(rest, reg.RCX)
	bits := GP32()
	MOVL(U32(1), bits)
	SHLL(reg.CL, bits)
	DECL(bits)
	KMOVW(bits, tail)
	body(true)
	Label(name + "done")
}

// genExpSum generates expSumAVX512.
func genExpSum(c *vexp.ConstTable) {
	TEXT("expSumAVX512", NOSPLIT, "func(y, x *float32, n int, scale, shift float32, acc *float64)")
	Pragma("noescape")
	Doc("expSumAVX512 sets y[j] = exp(fma(x[j], scale, -shift)) and adds float64(y[j]) to acc[j%8], for j < n",
		"(expSumAVX2's results, any n).")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	acc := Load(Param("acc"), GP64())
	scale, shift := broadcast("scale"), broadcast("shift")
	lo, hi, inf := expBounds(c)
	a := ZMM()
	VMOVUPD(Mem{Base: acc}, a)
	tail := K()
	rowLoop("exp", n, tail, expSumStep(c, y, x, scale, shift, lo, hi, inf, a, tail, nil), x, y)
	VMOVUPD(a, Mem{Base: acc})
	VZEROUPPER()
	RET()
}

// genSoftmaxPrefix generates softmaxPrefixAVX512: Max, ExpSum and Scale
// of one row in one call, with their loop bodies, and ExpSum's lane sums
// added as sumLanes adds them, ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)).
func genSoftmaxPrefix(c *vexp.ConstTable) {
	TEXT("softmaxPrefixAVX512", NOSPLIT, "func(y, x *float32, n, t int, scale float32)")
	Pragma("noescape")
	Doc("softmaxPrefixAVX512 sets y[:n] (n ≥ 1) to what Scale(y, y, float32(1/ExpSum(y, x, scale,",
		"shift))) leaves there, shift = scale·Max(x[:n]) (+0 for a zero maximum), and y[n:t] to zero:",
		"SoftmaxPrefix in one call.")
	yp := Load(Param("y"), GP64())
	xp := Load(Param("x"), GP64())
	nn := Load(Param("n"), GP64())
	tt := Load(Param("t"), GP64())
	scale := broadcast("scale")
	tail := K()
	x, y, n := GP64(), GP64(), GP64()

	// The row's largest element, as maxAVX512 finds it; then +0 for a
	// zero (m + 0), and the shift scale·m.
	MOVQ(xp, x)
	MOVQ(nn, n)
	m := rowMax("smax", x, n, tail)
	zero := ZMM()
	VPXORD(zero, zero, zero)
	VADDSS(zero.AsX(), m.AsX(), m.AsX())
	VMULSS(m.AsX(), scale.AsX(), m.AsX())
	shift := ZMM()
	VBROADCASTSS(m.AsX(), shift)

	// The exponentials into y and their float64 lane sums.
	lo, hi, inf := expBounds(c)
	a := ZMM()
	VXORPD(a, a, a)
	MOVQ(xp, x)
	MOVQ(yp, y)
	MOVQ(nn, n)
	// The last partial vector stays in a register: the scaling below
	// stores it once, with the zeros after it.
	last := ZMM()
	rowLoop("sexp", n, tail, expSumStep(c, y, x, scale, shift, lo, hi, inf, a, tail, last), x, y)

	// sumLanes: the neighbours' sums, then pairs of those, then the two.
	sw := ZMM()
	VPERMILPD(Imm(0x55), a, sw) // lanes 2k and 2k+1 swapped
	VADDPD(sw, a, a)            // lane 2k: s(2k) + s(2k+1)
	h := ZMM()
	VEXTRACTF64X4(Imm(1), a, h.AsY())
	u, v := XMM(), XMM()
	VEXTRACTF128(Imm(1), a.AsY(), u)
	VADDPD(u, a.AsX(), u) // (s0+s1) + (s2+s3)
	VEXTRACTF128(Imm(1), h.AsY(), v)
	VADDPD(v, h.AsX(), v) // (s4+s5) + (s6+s7)
	VADDSD(v, u, u)

	// Scale by float32(1/Σ), in place.
	one := GP64()
	MOVQ(U64(0x3ff0000000000000), one) // 1.0
	inv := ZMM()
	VMOVQ(one, inv.AsX())
	VDIVSD(u, inv.AsX(), inv.AsX())
	VCVTSD2SS(inv.AsX(), inv.AsX(), inv.AsX())
	VBROADCASTSS(inv.AsX(), inv)
	// The whole vectors scaled in place.
	MOVQ(yp, y)
	MOVQ(nn, n)
	SHRQ(Imm(4), n)
	JZ(LabelRef("sscaled"))
	Label("sscale")
	sv := ZMM()
	VMULPS(Mem{Base: y}, inv, sv)
	VMOVUPS(sv, Mem{Base: y})
	ADDQ(U32(zBytes), y)
	DECQ(n)
	JNZ(LabelRef("sscale"))
	Label("sscaled")

	// From there to t: the partial vector scaled, its lanes past n zero,
	// then zeros, each a whole store where it fits in the row, and only
	// the row's last partial vector under a mask (on a Zen 5 a masked
	// store next to the row's other stores cost about 28 ns a row).
	rest := GP64()
	MOVQ(nn, n)
	ANDQ(I32(-16), n)
	MOVQ(tt, rest)
	SUBQ(n, rest) // t - the whole vectors' elements
	MOVQ(nn, n)
	ANDQ(U32(15), n)
	JZ(LabelRef("szero"))
	VMULPS(last, inv, last)
	VMOVAPS_Z(last, tail, last) // tail: the exponentials' partial vector
	JMP(LabelRef("sput"))
	Label("szero")
	VMOVAPS(zero, last)
	Label("sput")
	CMPQ(rest, U32(16))
	JL(LabelRef("sputtail"))
	Label("sputloop")
	VMOVUPS(last, Mem{Base: y})
	VMOVAPS(zero, last)
	ADDQ(U32(zBytes), y)
	SUBQ(U32(16), rest)
	CMPQ(rest, U32(16))
	JGE(LabelRef("sputloop"))
	Label("sputtail")
	TESTQ(rest, rest)
	JZ(LabelRef("sdone"))
	MOVQ(rest, reg.RCX)
	bits := GP32()
	MOVL(U32(1), bits)
	SHLL(reg.CL, bits)
	DECL(bits)
	end := K()
	KMOVW(bits, end)
	VMOVUPS(last, end, Mem{Base: y})
	Label("sdone")
	VZEROUPPER()
	RET()
}

// expBounds loads ExpSum's clamp and +Inf (vexp.Clamped's lo, hi, inf).
func expBounds(c *vexp.ConstTable) (lo, hi, inf reg.VecVirtual) {
	lo, hi, inf = ZMM(), ZMM(), ZMM()
	VBROADCASTSS(c.At("lo"), lo)
	VBROADCASTSS(c.At("hi"), hi)
	VBROADCASTSS(c.At("inf"), inf)
	return lo, hi, inf
}

// rowMax emits maxAVX512's loop over the n elements at x (n and x
// advanced, tail clobbered) and returns the vector whose lane 0 holds
// their largest, or a NaN with all bits set if one is NaN.
func rowMax(name string, x, n reg.Register, tail reg.OpmaskVirtual) reg.VecVirtual {
	m := ZMM()
	VBROADCASTSS(Mem{Base: x}, m) // an element of x changes no maximum
	nan := K()
	KXORW(nan, nan, nan)
	rowLoop(name, n, tail, maxStep(x, m, nan, tail), x)
	vexp.MaxLanes(m)
	KORTESTW(nan, nan)
	JZ(LabelRef(name + "ok"))
	VPCMPEQD(m.AsX(), m.AsX(), m.AsX()) // all bits set: a NaN
	Label(name + "ok")
	return m
}

// expSumStep is ExpSum's loop body for rowLoop: y = exp(x·scale - shift)
// for one vector (its tail lanes +0), its low 8 and then its high 8 lanes
// added, widened, to the 8 float64 sums in a.
//
// With keep, the last partial vector is not stored but left in keep.
func expSumStep(c *vexp.ConstTable, y, x reg.Register, scale, shift, lo, hi, inf, a reg.VecVirtual, tail reg.OpmaskVirtual, keep reg.VecVirtual) func(masked bool) {
	return func(masked bool) {
		w := ZMM()
		if masked {
			in := ZMM()
			VMOVUPS_Z(Mem{Base: x}, tail, in)
			VMOVAPS(shift, w)
			VFMSUB231PS(in, scale, w) // w = x·scale - shift, rounded once
		} else {
			VMOVAPS(shift, w)
			VFMSUB231PS(Mem{Base: x}, scale, w)
		}
		e := vexp.Clamped(c.At, w, lo, hi, K(), inf)
		switch {
		case masked && keep != nil:
			VMOVAPS_Z(e, tail, keep) // the lanes past n add +0 (the sums are never -0)
			e = keep
		case masked:
			VMOVAPS_Z(e, tail, e)
			VMOVUPS(e, tail, Mem{Base: y})
		default:
			VMOVUPS(e, Mem{Base: y})
		}
		// Lanes 0-7 then 8-15 into the 8 sums of j%8.
		d, h := ZMM(), ZMM()
		VCVTPS2PD(e.AsY(), d)
		VADDPD(d, a, a)
		VEXTRACTF64X4(Imm(1), e, h.AsY())
		VCVTPS2PD(h.AsY(), h)
		VADDPD(h, a, a)
	}
}

// genMax generates maxAVX512.
func genMax() {
	TEXT("maxAVX512", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("maxAVX512 returns the largest of x[j] for j < n (n ≥ 1), or NaN (all bits set) if one is NaN; of +0 and",
		"-0 either.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	m := rowMax("max", x, n, K())
	p, err := ReturnIndex(0).Resolve()
	if err != nil {
		panic(err)
	}
	VMOVSS(m.AsX(), p.Addr)
	VZEROUPPER()
	RET()
}

// genScale generates scaleAVX512.
func genScale() {
	TEXT("scaleAVX512", NOSPLIT, "func(y, x *float32, n int, a float32)")
	Pragma("noescape")
	Doc("scaleAVX512 sets y[j] = x[j]·a for j < n.")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	a := broadcast("a")
	tail := K()
	rowLoop("scale", n, tail, scaleStep(y, x, a, tail), x, y)
	VZEROUPPER()
	RET()
}

// maxStep is Max's loop body for rowLoop: m = max(m, x) on one vector
// (its tail lanes left alone), nan or-ed with the lanes that are NaN.
func maxStep(x reg.Register, m reg.VecVirtual, nan, tail reg.OpmaskVirtual) func(masked bool) {
	return func(masked bool) {
		v, u := ZMM(), K()
		if masked {
			VMOVUPS_Z(Mem{Base: x}, tail, v) // zeros past n: not NaN, and not in the maximum below
			VCMPPS(Imm(3), v, v, u)          // UNORD_Q: v is NaN
			KORW(u, nan, nan)
			VMAXPS(v, m, tail, m) // m = m > v ? m : v where tail, else m
			return
		}
		VMOVUPS(Mem{Base: x}, v)
		VCMPPS(Imm(3), v, v, u)
		KORW(u, nan, nan)
		VMAXPS(v, m, m)
	}
}

// scaleStep is Scale's loop body for rowLoop: y = a·x on one vector.
func scaleStep(y, x reg.Register, a reg.VecVirtual, tail reg.OpmaskVirtual) func(masked bool) {
	return func(masked bool) {
		v := ZMM()
		if masked {
			VMOVUPS_Z(Mem{Base: x}, tail, v)
			VMULPS(v, a, v)
			VMOVUPS(v, tail, Mem{Base: y})
			return
		}
		VMULPS(Mem{Base: x}, a, v)
		VMOVUPS(v, Mem{Base: y})
	}
}
