// Command softmax512 generates the AVX-512 kernels of package vec's
// softmax row primitives (ExpSum, Max, Scale) with avo
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
	lo, hi, inf := ZMM(), ZMM(), ZMM()
	VBROADCASTSS(c.At("lo"), lo)
	VBROADCASTSS(c.At("hi"), hi)
	VBROADCASTSS(c.At("inf"), inf)
	a := ZMM()
	VMOVUPD(Mem{Base: acc}, a)
	tail := K()
	rowLoop("exp", n, tail, func(masked bool) {
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
		if masked {
			VMOVAPS_Z(e, tail, e) // the lanes past n add +0 (the sums are never -0)
			VMOVUPS(e, tail, Mem{Base: y})
		} else {
			VMOVUPS(e, Mem{Base: y})
		}
		// Lanes 0-7 then 8-15 into the 8 sums of j%8.
		d, h := ZMM(), ZMM()
		VCVTPS2PD(e.AsY(), d)
		VADDPD(d, a, a)
		VEXTRACTF64X4(Imm(1), e, h.AsY())
		VCVTPS2PD(h.AsY(), h)
		VADDPD(h, a, a)
	}, x, y)
	VMOVUPD(a, Mem{Base: acc})
	VZEROUPPER()
	RET()
}

// genMax generates maxAVX512.
func genMax() {
	TEXT("maxAVX512", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("maxAVX512 returns the largest of x[j] for j < n (n ≥ 1), or NaN (all bits set) if one is NaN; of +0 and",
		"-0 either.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	m := ZMM()
	VBROADCASTSS(Mem{Base: x}, m) // an element of x changes no maximum
	nan := K()
	KXORW(nan, nan, nan)
	tail := K()
	rowLoop("max", n, tail, func(masked bool) {
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
	}, x)
	vexp.MaxLanes(m)
	KORTESTW(nan, nan)
	JZ(LabelRef("maxret"))
	VPCMPEQD(m.AsX(), m.AsX(), m.AsX()) // all bits set: a NaN
	Label("maxret")
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
	rowLoop("scale", n, tail, func(masked bool) {
		v := ZMM()
		if masked {
			VMOVUPS_Z(Mem{Base: x}, tail, v)
			VMULPS(v, a, v)
			VMOVUPS(v, tail, Mem{Base: y})
			return
		}
		VMULPS(Mem{Base: x}, a, v)
		VMOVUPS(v, Mem{Base: y})
	}, x, y)
	VZEROUPPER()
	RET()
}
