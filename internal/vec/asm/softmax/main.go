// Command softmax generates the AVX2+FMA kernels of package vec's
// softmax and cross-entropy row primitives (ExpSum, Max, Scale, Dot,
// SoftmaxGrad) with
// avo (github.com/mmcloughlin/avo). `go generate` in internal/vec runs it:
//
//	go run -C asm/softmax . -out ../../softmax_amd64.s -stubs ../../softmax_amd64_stubs.go -pkg vec
//
// ExpSum, Max and Scale take the whole row: its last partial vector is
// read and written under a mask (VMASKMOVPS, which neither reads nor
// faults on the lanes past n), so the Go side copies nothing. Dot takes
// whole vectors and a zero-padded copy of the rest, SoftmaxGrad whole
// groups of 4 (the Go side adds the rest). The exp is package vexp's,
// shared with the GELU kernels; internal/vec/softmax.go holds the same
// algorithm in Go. Float parameters are broadcast straight from their
// stack slots (a legacy-SSE load before the AVX code costs a transition
// penalty on Zen 3), every kernel ends with VZEROUPPER, and the generator
// fails if avo allocated a register that only AVX-512 has.
package main

import (
	"flag"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"gptlab/internal/vec/asm/internal/vexp"
)

// constSymbol names the kernels' constants.
const constSymbol = "softmaxconst"

func main() {
	flag.Parse()
	ConstraintExpr("amd64,!purego")
	c := vexp.NewExpTable(constSymbol)
	c.Add(maskOnes, 0xffffffff)
	c.Add(maskZeros, 0)
	genExpSum(c)
	genMax(c)
	genScale(c)
	genDot()
	genSoftmaxGrad()
	c.Emit()
	Generate()
	vexp.CheckAVX2Registers()
}

// broadcast loads the float32 parameter name into all 8 lanes of a YMM
// straight from memory (no legacy-SSE load).
func broadcast(name string) reg.VecVirtual {
	p, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	y := YMM()
	VBROADCASTSS(p.Addr, y)
	return y
}

// rowLoop emits, for the n elements at the pointers (any n): body(false)
// once per whole vector of 8, each pointer then advanced a vector; then,
// if n%8 is not 0, body(true) once with mask's lanes [0, n%8) all ones
// and the others zero (VMASKMOVPS neither reads nor faults on the others).
func rowLoop(c *vexp.ConstTable, name string, n reg.Register, mask reg.VecVirtual, body func(masked bool), ptrs ...reg.Register) {
	rest := GP64()
	MOVQ(n, rest)
	ANDQ(U32(7), rest)
	SHRQ(Imm(3), n)
	JZ(LabelRef(name + "tail"))
	Label(name + "loop")
	body(false)
	for _, p := range ptrs {
		ADDQ(U32(vexp.VecBytes), p)
	}
	DECQ(n)
	JNZ(LabelRef(name + "loop"))
	Label(name + "tail")
	TESTQ(rest, rest)
	JZ(LabelRef(name + "done"))
	// The 8 dwords from maskOnes + 32 - 4·rest: rest of maskOnes' all-ones
	// lanes, then maskZeros' zeros (the table holds the two vectors in turn).
	t := GP64()
	LEAQ(c.At(maskOnes), t)
	NEGQ(rest)
	VMOVDQU(Mem{Base: t, Index: rest, Scale: 4, Disp: vexp.VecBytes}, mask)
	body(true)
	Label(name + "done")
}

// The tail masks' table: two vectors, one after the other.
const (
	maskOnes  = "maskOnes"
	maskZeros = "maskZeros"
)

// addWide adds the 8 float32 of v, widened to float64, to the accumulators
// a[0] (lanes 0-3) and a[1] (lanes 4-7).
func addWide(v reg.VecVirtual, a [2]reg.VecVirtual) {
	lo, hi := YMM(), YMM()
	VCVTPS2PD(v.AsX(), lo)
	VEXTRACTF128(Imm(1), v, hi.AsX())
	VCVTPS2PD(hi.AsX(), hi)
	VADDPD(lo, a[0], a[0])
	VADDPD(hi, a[1], a[1])
}

// loadAcc loads the 8 float64 lanes at acc; storeAcc stores them back.
func loadAcc(acc reg.Register) [2]reg.VecVirtual {
	a := [2]reg.VecVirtual{YMM(), YMM()}
	VMOVUPD(Mem{Base: acc}, a[0])
	VMOVUPD(Mem{Base: acc, Disp: vexp.VecBytes}, a[1])
	return a
}

func storeAcc(acc reg.Register, a [2]reg.VecVirtual) {
	VMOVUPD(a[0], Mem{Base: acc})
	VMOVUPD(a[1], Mem{Base: acc, Disp: vexp.VecBytes})
}

// genExpSum generates expSumAVX2.
func genExpSum(c *vexp.ConstTable) {
	TEXT("expSumAVX2", NOSPLIT, "func(y, x *float32, n int, scale, shift float32, acc *float64)")
	Pragma("noescape")
	Doc("expSumAVX2 sets y[j] = exp(fma(x[j], scale, -shift)) and adds float64(y[j]) to acc[j%8], for j < n.")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	acc := Load(Param("acc"), GP64())
	scale, shift := broadcast("scale"), broadcast("shift")
	lo, hi := YMM(), YMM()
	VMOVUPS(c.At("lo"), lo)
	VMOVUPS(c.At("hi"), hi)
	a := loadAcc(acc)
	mask := YMM()
	rowLoop(c, "exp", n, mask, func(masked bool) {
		w := YMM()
		VMOVAPS(shift, w)
		if masked {
			in := YMM()
			VMASKMOVPS(Mem{Base: x}, mask, in) // zeros past n
			VFMSUB231PS(in, scale, w)
		} else {
			VFMSUB231PS(Mem{Base: x}, scale, w) // w = x·scale - shift, rounded once
		}
		e := vexp.Clamped(c.At, w, lo, hi, YMM(), c.At("inf"))
		if masked {
			VANDPS(mask, e, e) // the lanes past n add +0 (the sums are never -0)
			VMASKMOVPS(e, mask, Mem{Base: y})
		} else {
			VMOVUPS(e, Mem{Base: y})
		}
		addWide(e, a)
	}, x, y)
	storeAcc(acc, a)
	VZEROUPPER()
	RET()
}

// genMax generates maxAVX2.
func genMax(c *vexp.ConstTable) {
	TEXT("maxAVX2", NOSPLIT, "func(x *float32, n int) float32")
	Pragma("noescape")
	Doc("maxAVX2 returns the largest of x[j] for j < n (n ≥ 1), or NaN (all bits set) if one is NaN; of +0 and",
		"-0 either.")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	m, nan := YMM(), YMM()
	VBROADCASTSS(Mem{Base: x}, m) // an element of x changes no maximum
	VXORPS(nan, nan, nan)
	mask := YMM()
	rowLoop(c, "max", n, mask, func(masked bool) {
		v, u := YMM(), YMM()
		if masked {
			VMASKMOVPS(Mem{Base: x}, mask, v)
			VBLENDVPS(mask, v, m, v) // m's lanes past n: they change no maximum
		} else {
			VMOVUPS(Mem{Base: x}, v)
		}
		VCMPPS(Imm(3), v, v, u) // UNORD_Q: v is NaN
		VORPS(u, nan, nan)
		VMAXPS(v, m, m) // m = m > v ? m : v
	}, x)
	vexp.MaxLanes(m)
	bits := GP32()
	VMOVMSKPS(nan, bits)
	TESTL(bits, bits)
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

// genScale generates scaleAVX2.
func genScale(c *vexp.ConstTable) {
	TEXT("scaleAVX2", NOSPLIT, "func(y, x *float32, n int, a float32)")
	Pragma("noescape")
	Doc("scaleAVX2 sets y[j] = x[j]·a for j < n.")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	a := broadcast("a")
	mask := YMM()
	rowLoop(c, "scale", n, mask, func(masked bool) {
		v := YMM()
		if masked {
			VMASKMOVPS(Mem{Base: x}, mask, v)
			VMULPS(v, a, v)
			VMASKMOVPS(v, mask, Mem{Base: y})
			return
		}
		VMULPS(Mem{Base: x}, a, v)
		VMOVUPS(v, Mem{Base: y})
	}, x, y)
	VZEROUPPER()
	RET()
}

// genDot generates dotAVX2: four vectors per trip into four sets of
// accumulators, so that for short rows the chains of additions, not the
// genSoftmaxGrad generates SoftmaxGrad's two passes on whole groups of 4
// (n a multiple of 4), in float64 with no fused multiply-add:
// dot4AVX2 sums y[j]·dy[j] into lane j%4 in order, and softmaxGradAVX2
// sets ds[j] = float32((scale·y[j])·(dy[j] − dot)).
func genSoftmaxGrad() {
	TEXT("dot4AVX2", NOSPLIT, "func(y, dy *float32, n int, lanes *[4]float64)")
	Pragma("noescape")
	Doc("dot4AVX2 sets lanes[l] = Σ float64(y[j])·float64(dy[j]) over j < n, j%4 == l, in order (n a multiple of 4).")
	yp := Load(Param("y"), GP64())
	dp := Load(Param("dy"), GP64())
	n := Load(Param("n"), GP64())
	acc, u, v := YMM(), YMM(), YMM()
	VXORPD(acc, acc, acc)
	SHRQ(Imm(2), n)
	JZ(LabelRef("dot4done"))
	Label("dot4loop")
	VCVTPS2PD(Mem{Base: yp}, u)
	VCVTPS2PD(Mem{Base: dp}, v)
	VMULPD(v, u, u)
	VADDPD(u, acc, acc)
	ADDQ(U32(16), yp)
	ADDQ(U32(16), dp)
	DECQ(n)
	JNZ(LabelRef("dot4loop"))
	Label("dot4done")
	lanes := Load(Param("lanes"), GP64())
	VMOVUPD(acc, Mem{Base: lanes})
	VZEROUPPER()
	RET()

	TEXT("softmaxGradAVX2", NOSPLIT, "func(ds, y, dy *float32, n int, scale, dot float64)")
	Pragma("noescape")
	Doc("softmaxGradAVX2 sets ds[j] = float32((scale·float64(y[j]))·(float64(dy[j]) − dot)) for j < n (n a multiple of 4).")
	sp := Load(Param("ds"), GP64())
	yp = Load(Param("y"), GP64())
	dp = Load(Param("dy"), GP64())
	n = Load(Param("n"), GP64())
	sc, dt := YMM(), YMM()
	for _, b := range []struct {
		name string
		y    reg.VecVirtual
	}{{"scale", sc}, {"dot", dt}} {
		p, err := Param(b.name).Resolve()
		if err != nil {
			panic(err)
		}
		VBROADCASTSD(p.Addr, b.y)
	}
	SHRQ(Imm(2), n)
	JZ(LabelRef("sgdone"))
	Label("sgloop")
	VCVTPS2PD(Mem{Base: yp}, u)
	VCVTPS2PD(Mem{Base: dp}, v)
	VMULPD(sc, u, u) // scale·y
	VSUBPD(dt, v, v) // dy − dot
	VMULPD(v, u, u)
	VCVTPD2PSY(u, u.AsX())
	VMOVUPS(u.AsX(), Mem{Base: sp})
	ADDQ(U32(16), sp)
	ADDQ(U32(16), yp)
	ADDQ(U32(16), dp)
	DECQ(n)
	JNZ(LabelRef("sgloop"))
	Label("sgdone")
	VZEROUPPER()
	RET()
}

// conversions, are short.
func genDot() {
	TEXT("dotAVX2", NOSPLIT, "func(a, b *float32, n int, ta, tb *float32) float64")
	Pragma("noescape")
	Doc("dotAVX2 returns Σ float64(a[j])·float64(b[j]) (each product exact) for j < n (n a multiple of 8), and",
		"the 8 of ta and tb if ta is not nil, in the order of vec.Dot (dotLane).")
	ap := Load(Param("a"), GP64())
	bp := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	var s [8]reg.VecVirtual
	for k := range s {
		s[k] = YMM()
		VXORPD(s[k], s[k], s[k])
	}
	// vector adds the products of the vector at a+off, b+off to set.
	vector := func(a, b reg.Register, off, set int) {
		for k := range 2 {
			u, v := YMM(), YMM()
			VCVTPS2PD(Mem{Base: a, Disp: off + 16*k}, u)
			VCVTPS2PD(Mem{Base: b, Disp: off + 16*k}, v)
			VMULPD(v, u, u)
			VADDPD(u, s[2*set+k], s[2*set+k])
		}
	}
	SHRQ(Imm(3), n) // vectors
	trips := GP64()
	MOVQ(n, trips)
	SHRQ(Imm(2), trips)
	JZ(LabelRef("dotrest"))
	Label("dotloop")
	for set := range 4 {
		vector(ap, bp, set*vexp.VecBytes, set)
	}
	ADDQ(U32(4*vexp.VecBytes), ap)
	ADDQ(U32(4*vexp.VecBytes), bp)
	DECQ(trips)
	JNZ(LabelRef("dotloop"))
	Label("dotrest")
	ANDQ(U32(3), n)
	JZ(LabelRef("dottail"))
	Label("dotrestloop")
	vector(ap, bp, 0, 0)
	ADDQ(U32(vexp.VecBytes), ap)
	ADDQ(U32(vexp.VecBytes), bp)
	DECQ(n)
	JNZ(LabelRef("dotrestloop"))
	Label("dottail")
	ta := Load(Param("ta"), GP64())
	tb := Load(Param("tb"), GP64())
	TESTQ(ta, ta)
	JZ(LabelRef("dotdone"))
	vector(ta, tb, 0, 0)
	Label("dotdone")
	// Lanes 0-3 and 4-7: (set 0 + set 1) + (set 2 + set 3).
	for k := range 2 {
		VADDPD(s[2+k], s[k], s[k])
		VADDPD(s[6+k], s[4+k], s[4+k])
		VADDPD(s[4+k], s[k], s[k])
	}
	// [l0+l1, l4+l5, l2+l3, l6+l7], then [(l0+l1)+(l2+l3), (l4+l5)+(l6+l7)].
	VHADDPD(s[1], s[0], s[0])
	hi := XMM()
	VEXTRACTF128(Imm(1), s[0], hi)
	VADDPD(hi, s[0].AsX(), hi)
	sh := XMM()
	VPERMILPD(Imm(1), hi, sh)
	VADDSD(sh, hi, hi)
	p, err := ReturnIndex(0).Resolve()
	if err != nil {
		panic(err)
	}
	VMOVSD(hi, p.Addr)
	VZEROUPPER()
	RET()
}
