// Command asm generates the vector kernels of package precision with avo
// (github.com/mmcloughlin/avo): the slice conversions between float32 and
// fp16/bf16 and the gradient checks of the loss scaler. It lives in its own
// module so that the main module does not depend on avo; `go generate` in
// precision runs it:
//
//	go run -C asm . -out ../kernels_amd64.s -stubs ../kernels_amd64_stubs.go -pkg precision
//
// Every kernel handles whole groups only (n a multiple of the group the
// kernel's doc comment names); the Go side converts the rest with the
// scalar code. Each conversion kernel gives bitwise the scalar results
// (precision's tests check all 2^32 float32 inputs):
//
//   - fp16: F16C's VCVTPS2PH with immediate rounding RNE (imm 0), and
//     VCVTPH2PS, which are the IEEE conversions the scalar code computes
//     (a NaN keeps its sign and top payload bits and comes out quiet).
//   - bf16 with AVX512_BF16: VCVTNEPS2BF16 rounds to nearest even and
//     quiets NaNs like the scalar code, but treats subnormal inputs as
//     zero (SDM: "input denormals are always treated as zero", whatever
//     MXCSR.DAZ says). Lanes with a subnormal input are redone with integer
//     arithmetic, on a branch taken only when a vector has one.
//   - bf16 without it: the scalar code's integer rounding, x + 0x7FFF +
//     lsb, on 32-bit lanes, with NaN lanes replaced by the quieted top half.
//
// Saturating variants clamp, before converting, the finite inputs that
// would round past the largest finite value to a value that rounds to it.
//
// Go's assembler has no AVX512_BF16 mnemonics: VCVTNEPS2BF16 is emitted as
// BYTE directives (package x86enc) on fixed physical registers.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"gptlab/precision/asm/x86enc"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genEncFP16(f16c)
	genEncFP16(avx512)
	genDecFP16(f16c)
	genDecFP16(avx512)
	genEncBF16Native(true)
	genEncBF16Native(false)
	genEncBF16Int(avx2)
	genEncBF16Int(avx512)
	genDecBF16(avx2)
	genDecBF16(avx512)
	genMaxAbs(avx2, false)
	genMaxAbs(avx512, false)
	genMaxAbs(avx2, true)
	genMaxAbs(avx512, true)
	Generate()
}

// isa is a vector width and the instruction set of a kernel family.
type isa struct {
	name  string
	lanes int // float32 lanes per vector
	vec   func() reg.VecVirtual
	half  func() reg.VecVirtual // a vector of lanes 16-bit values
}

var (
	f16c   = isa{name: "F16C", lanes: 8, vec: YMM, half: XMM}
	avx2   = isa{name: "AVX2", lanes: 8, vec: YMM, half: XMM}
	avx512 = isa{name: "AVX512", lanes: 16, vec: ZMM, half: YMM}
)

// unroll is the vectors per main-loop trip.
const unroll = 4

// Bit patterns the kernels use.
const (
	absMask   = 0x7FFFFFFF
	signMask  = 0x80000000
	f32Inf    = 0x7F800000
	f32Exp    = 0x7F800000
	f32Mant   = 0x007FFFFF
	bf16Quiet = 0x0040     // quiet bit of a bf16 NaN, in the low half
	f32Quiet  = 0x00400000 // quiet bit of a float32 NaN
	// fp16 saturation: |x| >= 65520 rounds to Inf; 65504 is the largest.
	fp16SatFrom, fp16SatTo = 0x477FF000, 0x477FE000
	// bf16 saturation: |x| >= 0x7F7F8000 rounds to Inf; 0x7F7F7FFF rounds
	// to the largest finite bf16, 0x7F7F.
	bf16SatFrom, bf16SatTo = 0x7F7F8000, 0x7F7F7FFF
)

// bcast returns a new vector of v's kind with every 32-bit lane set to c.
func bcast(s isa, c uint32) reg.VecVirtual {
	g := GP32()
	MOVL(U32(c), g)
	v := s.vec()
	if s.lanes == 16 {
		VPBROADCASTD(g, v)
		return v
	}
	x := XMM()
	MOVD(g, x)
	VPBROADCASTD(x, v)
	return v
}

// bcastTo sets every 32-bit lane of the physical ZMM register v to c.
func bcastTo(v reg.Register, c uint32) {
	g := GP32()
	MOVL(U32(c), g)
	VPBROADCASTD(g, v)
}

// loop emits the element loop of a kernel over i in [0, n) (n a multiple of
// lanes): unroll groups a trip while that many remain, then one a trip.
// body(u, i) emits the code of group u of a trip at element index i.
func loop(prefix string, n reg.Register, lanes int, body func(u int, i reg.Register)) {
	i := GP64()
	XORQ(i, i)
	big := GP64()
	MOVQ(n, big)
	SUBQ(U32(lanes*unroll), big)
	Label(prefix + "_big")
	CMPQ(i, big)
	JG(LabelRef(prefix + "_one"))
	for u := range unroll {
		body(u, i)
	}
	ADDQ(U32(lanes*unroll), i)
	JMP(LabelRef(prefix + "_big"))
	Label(prefix + "_one")
	CMPQ(i, n)
	JGE(LabelRef(prefix + "_end"))
	body(0, i)
	ADDQ(U32(lanes), i)
	JMP(LabelRef(prefix + "_one"))
	Label(prefix + "_end")
}

// f32At and u16At address group u of a trip at element index i.
func f32At(p, i reg.Register, lanes, u int) Mem {
	return Mem{Base: p, Index: i, Scale: 4, Disp: 4 * lanes * u}
}

func u16At(p, i reg.Register, lanes, u int) Mem {
	return Mem{Base: p, Index: i, Scale: 2, Disp: 2 * lanes * u}
}

// satConsts are the vectors a saturating clamp needs.
type satConsts struct{ abs, sign, from, inf, to reg.Register }

func newSat(s isa, from, to uint32) satConsts {
	return satConsts{abs: bcast(s, absMask), sign: bcast(s, signMask),
		from: bcast(s, from), inf: bcast(s, f32Inf), to: bcast(s, to)}
}

// clamp replaces, in x, the lanes whose magnitude is in [from, Inf) by
// (x's sign) | to.
func (c satConsts) clamp(s isa, x reg.Register) {
	abs, t := s.vec(), s.vec()
	if s.lanes == 16 {
		VPANDD(c.abs, x, abs)
		k1, k2 := K(), K()
		VPCMPUD(Imm(5), c.from, abs, k1)    // abs >= from
		VPCMPUD(Imm(1), c.inf, abs, k1, k2) // and abs < Inf
		VPANDD(c.sign, x, t)
		VPORD(c.to, t, k2, x)
		return
	}
	// AVX2 has signed compares only: magnitudes are below 2^31, so signed
	// order is unsigned order. abs > from-1 stands for abs >= from.
	m1, m2 := s.vec(), s.vec()
	VPAND(c.abs, x, abs)
	VPCMPGTD(c.from, abs, m1) // from holds from-1 here
	VPCMPGTD(abs, c.inf, m2)
	VPAND(m1, m2, m1)
	VPAND(c.sign, x, t)
	VPOR(c.to, t, t)
	VPBLENDVB(m1, t, x, x)
}

// newSatFor is newSat for s: AVX2's clamp compares with from-1.
func newSatFor(s isa, from, to uint32) satConsts {
	if s.lanes == 16 {
		return newSat(s, from, to)
	}
	return newSat(s, from-1, to)
}

// satBranch emits, after the parameters are loaded, a test of sat and the
// two element loops: body(sat, u, i) emits one group.
func satBranch(prefix string, n reg.Register, lanes int, body func(sat bool, u int, i reg.Register)) {
	sat := Load(Param("sat"), GP8())
	TESTB(sat, sat)
	JNZ(LabelRef(prefix + "_sat"))
	loop(prefix+"_rne", n, lanes, func(u int, i reg.Register) { body(false, u, i) })
	JMP(LabelRef(prefix + "_done"))
	Label(prefix + "_sat")
	loop(prefix+"_satloop", n, lanes, func(u int, i reg.Register) { body(true, u, i) })
	Label(prefix + "_done")
	VZEROUPPER()
	RET()
}

// header starts a conversion kernel called name: its TEXT with signature
// sig (parameters dst, src, n first), the noescape pragma and doc; it
// loads and returns dst, src and n.
func header(name, sig, doc string) (dst, src, n reg.Register) {
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc)
	return Load(Param("dst"), GP64()), Load(Param("src"), GP64()), Load(Param("n"), GP64())
}

// genEncFP16 generates encFP16<ISA>: dst[i] = ToFP16(src[i]) (or
// ToFP16Sat with sat) with VCVTPS2PH.
func genEncFP16(s isa) {
	name := "encFP16" + s.name
	dst, src, n := header(name, "func(dst *uint16, src *float32, n int, sat bool)", fmt.Sprintf("%s sets dst[i] = ToFP16(src[i]), or ToFP16Sat(src[i]) if sat, for i < n (n a multiple of %d).", name, s.lanes))
	sc := newSatFor(s, fp16SatFrom, fp16SatTo)
	satBranch(name, n, s.lanes, func(sat bool, u int, i reg.Register) {
		x := s.vec()
		VMOVUPS(f32At(src, i, s.lanes, u), x)
		if sat {
			sc.clamp(s, x)
		}
		VCVTPS2PH(Imm(0), x, u16At(dst, i, s.lanes, u)) // imm 0: round to nearest even
	})
}

// genDecFP16 generates decFP16<ISA>: dst[i] = FromFP16(src[i]) with
// VCVTPH2PS.
func genDecFP16(s isa) {
	name := "decFP16" + s.name
	dst, src, n := header(name, "func(dst *float32, src *uint16, n int)", fmt.Sprintf("%s sets dst[i] = FromFP16(src[i]) for i < n (n a multiple of %d).", name, s.lanes))
	loop(name, n, s.lanes, func(u int, i reg.Register) {
		x := s.vec()
		VCVTPH2PS(u16At(src, i, s.lanes, u), x)
		VMOVUPS(x, f32At(dst, i, s.lanes, u))
	})
	VZEROUPPER()
	RET()
}

// genEncBF16Native generates encBF16AVX512BF16 (fix true): dst[i] =
// ToBF16(src[i]) with VCVTNEPS2BF16 and the subnormal lanes redone; or,
// with fix false, vcvtneps2bf16Raw, the bare instruction, which the tests
// compare with an emulation of the SDM's definition. The vector registers
// are physical (the instruction is bytes): Z0-Z3 inputs, Y4-Y7 results,
// Z16-Z31 constants and temporaries.
func genEncBF16Native(fix bool) {
	name := "encBF16AVX512BF16"
	sig := "func(dst *uint16, src *float32, n int, sat bool)"
	doc := name + " sets dst[i] = ToBF16(src[i]), or ToBF16Sat(src[i]) if sat, for i < n (n a multiple of 16)."
	if !fix {
		name, sig = "vcvtneps2bf16Raw", "func(dst *uint16, src *float32, n int)"
		doc = name + " sets dst[i] to VCVTNEPS2BF16's result for src[i], for i < n (n a multiple of 16)."
	}
	dst, src, n := header(name, sig, doc)
	cExp, cMant, cBias, cOne := reg.Z16, reg.Z17, reg.Z18, reg.Z19
	cAbs, cSign, cFrom, cInf, cTo := reg.Z20, reg.Z21, reg.Z22, reg.Z23, reg.Z24
	for _, c := range []struct {
		r reg.Register
		v uint32
	}{{cExp, f32Exp}, {cMant, f32Mant}, {cBias, 0x7FFF}, {cOne, 1},
		{cAbs, absMask}, {cSign, signMask}, {cFrom, bf16SatFrom}, {cInf, f32Inf}, {cTo, bf16SatTo}} {
		bcastTo(c.r, c.v)
	}
	in := []reg.Register{reg.Z0, reg.Z1, reg.Z2, reg.Z3}
	outY := []reg.Register{reg.Y4, reg.Y5, reg.Y6, reg.Y7}
	outZ := []int{4, 5, 6, 7}
	tmp := []reg.Register{reg.Z25, reg.Z26, reg.Z27, reg.Z28}
	tmpY := []reg.Register{reg.Y25, reg.Y26, reg.Y27, reg.Y28}
	var labels int
	body := func(sat bool, u int, i reg.Register) {
		x, y := in[u], outY[u]
		VMOVUPS(f32At(src, i, 16, u), x)
		if sat {
			k1, k2 := reg.K1, reg.K2
			VPANDD(cAbs, x, tmp[u])
			VPCMPUD(Imm(5), cFrom, tmp[u], k1)
			VPCMPUD(Imm(1), cInf, tmp[u], k1, k2)
			VPANDD(cSign, x, tmp[u])
			VPORD(cTo, tmp[u], k2, x)
		}
		x86enc.Emit(fmt.Sprintf("VCVTNEPS2BF16 Z%d, Y%d", u, outZ[u]), x86enc.VCVTNEPS2BF16(outZ[u], u), []Op{x}, []Op{y})
		if fix {
			// Lanes with exponent 0 and a nonzero fraction: subnormal.
			k3, k4 := reg.K3, reg.K4
			VPTESTNMD(cExp, x, k3)
			VPTESTMD(cMant, x, k3, k4)
			KORTESTW(k4, k4)
			skip := fmt.Sprintf("%s_normal%d", name, labels)
			labels++
			JZ(LabelRef(skip))
			t := tmp[u]
			VPSRLD(Imm(16), x, t)
			VPANDD(cOne, t, t)
			VPADDD(cBias, t, t)
			VPADDD(x, t, t)
			VPSRLD(Imm(16), t, t)
			VPMOVDW(t, tmpY[u])
			VMOVDQU16(tmpY[u], k4, y)
			Label(skip)
		}
		VMOVDQU(y, u16At(dst, i, 16, u))
	}
	if !fix {
		loop(name, n, 16, func(u int, i reg.Register) { body(false, u, i) })
		VZEROUPPER()
		RET()
		return
	}
	satBranch(name, n, 16, body)
}

// genEncBF16Int generates encBF16<ISA>: dst[i] = ToBF16(src[i]) (or
// ToBF16Sat) with the scalar code's integer rounding on 32-bit lanes, 16
// values a group.
func genEncBF16Int(s isa) {
	name := "encBF16" + s.name
	dst, src, n := header(name, "func(dst *uint16, src *float32, n int, sat bool)", fmt.Sprintf("%s sets dst[i] = ToBF16(src[i]), or ToBF16Sat(src[i]) if sat, for i < n (n a multiple of 16).", name))
	sc := newSatFor(s, bf16SatFrom, bf16SatTo)
	cBias, cOne, cQuiet := bcast(s, 0x7FFF), bcast(s, 1), bcast(s, bf16Quiet)
	// round returns the rounded top halves of x's lanes in 32-bit lanes.
	round := func(x reg.Register) reg.Register {
		t, r, abs := s.vec(), s.vec(), s.vec()
		if s.lanes == 16 {
			VPSRLD(Imm(16), x, t)
			VPANDD(cOne, t, r)
			VPADDD(cBias, r, r)
			VPADDD(x, r, r)
			VPSRLD(Imm(16), r, r)
			VPANDD(sc.abs, x, abs)
			k := K()
			VPCMPUD(Imm(6), sc.inf, abs, k) // abs > Inf: NaN
			VPORD(cQuiet, t, k, r)
			return r
		}
		m := s.vec()
		VPSRLD(Imm(16), x, t)
		VPAND(cOne, t, r)
		VPADDD(cBias, r, r)
		VPADDD(x, r, r)
		VPSRLD(Imm(16), r, r)
		VPAND(sc.abs, x, abs)
		VPCMPGTD(sc.inf, abs, m)
		VPOR(cQuiet, t, t)
		VPBLENDVB(m, t, r, r)
		return r
	}
	satBranch(name, n, 16, func(sat bool, u int, i reg.Register) {
		if s.lanes == 16 {
			x := s.vec()
			VMOVUPS(f32At(src, i, 16, u), x)
			if sat {
				sc.clamp(s, x)
			}
			VPMOVDW(round(x), u16At(dst, i, 16, u))
			return
		}
		var r [2]reg.Register
		for h := range r {
			x := s.vec()
			VMOVUPS(f32At(src, i, 8, 2*u+h), x)
			if sat {
				sc.clamp(s, x)
			}
			r[h] = round(x)
		}
		// The lanes are below 2^16: the unsigned saturating pack is exact.
		// It interleaves 128-bit halves; VPERMQ puts them back in order.
		p := s.vec()
		VPACKUSDW(r[1], r[0], p)
		VPERMQ(Imm(0xD8), p, p)
		VMOVDQU(p, u16At(dst, i, 16, u))
	})
}

// genDecBF16 generates decBF16<ISA>: dst[i] = FromBF16(src[i]): the bits
// shifted into the top half, NaNs quieted.
func genDecBF16(s isa) {
	name := "decBF16" + s.name
	dst, src, n := header(name, "func(dst *float32, src *uint16, n int)", fmt.Sprintf("%s sets dst[i] = FromBF16(src[i]) for i < n (n a multiple of %d).", name, s.lanes))
	cAbs, cInf, cQuiet := bcast(s, absMask), bcast(s, f32Inf), bcast(s, f32Quiet)
	loop(name, n, s.lanes, func(u int, i reg.Register) {
		x, abs := s.vec(), s.vec()
		VPMOVZXWD(u16At(src, i, s.lanes, u), x)
		VPSLLD(Imm(16), x, x)
		if s.lanes == 16 {
			VPANDD(cAbs, x, abs)
			k := K()
			VPCMPUD(Imm(6), cInf, abs, k)
			VPORD(cQuiet, x, k, x)
		} else {
			m := s.vec()
			VPAND(cAbs, x, abs)
			VPCMPGTD(cInf, abs, m)
			VPAND(cQuiet, m, m)
			VPOR(m, x, x)
		}
		VMOVUPS(x, f32At(dst, i, s.lanes, u))
	})
	VZEROUPPER()
	RET()
}

// genMaxAbs generates maxAbs<ISA> (the largest magnitude's bits, for the
// finiteness check) or, with scale, unscale<ISA>, which also multiplies
// every value by inv in place.
func genMaxAbs(s isa, scale bool) {
	name, sig := "maxAbs"+s.name, "func(x *float32, n int) uint32"
	doc := fmt.Sprintf("%s returns the largest x[i]&0x7FFFFFFF for i < n (n a multiple of %d).", name, s.lanes)
	if scale {
		name, sig = "unscale"+s.name, "func(x *float32, n int, inv float32) uint32"
		doc = fmt.Sprintf("%s returns the largest x[i]&0x7FFFFFFF and sets x[i] *= inv, for i < n (n a multiple of %d).", name, s.lanes)
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc)
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	var inv reg.Register
	if scale {
		f := Load(Param("inv"), XMM())
		inv = s.vec()
		VBROADCASTSS(f, inv)
	}
	cAbs := bcast(s, absMask)
	acc := make([]reg.VecVirtual, unroll)
	for u := range acc {
		acc[u] = s.vec()
		if s.lanes == 16 {
			VPXORD(acc[u], acc[u], acc[u])
		} else {
			VPXOR(acc[u], acc[u], acc[u])
		}
	}
	loop(name, n, s.lanes, func(u int, i reg.Register) {
		v, a := s.vec(), s.vec()
		VMOVUPS(f32At(x, i, s.lanes, u), v)
		if s.lanes == 16 {
			VPANDD(cAbs, v, a)
		} else {
			VPAND(cAbs, v, a)
		}
		VPMAXUD(a, acc[u], acc[u])
		if scale {
			VMULPS(inv, v, v)
			VMOVUPS(v, f32At(x, i, s.lanes, u))
		}
	})
	for u := 1; u < unroll; u++ {
		VPMAXUD(acc[u], acc[0], acc[0])
	}
	y := acc[0].AsY()
	if s.lanes == 16 {
		hi := YMM()
		VEXTRACTI64X4(Imm(1), acc[0], hi)
		VPMAXUD(hi, y, y)
	}
	xl, xh := acc[0].AsX(), XMM()
	VEXTRACTI128(Imm(1), y, xh)
	VPMAXUD(xh, xl, xl)
	VPSHUFD(Imm(0x4E), xl, xh)
	VPMAXUD(xh, xl, xl)
	VPSHUFD(Imm(0xB1), xl, xh)
	VPMAXUD(xh, xl, xl)
	r := GP32()
	MOVD(xl, r)
	Store(r, ReturnIndex(0))
	VZEROUPPER()
	RET()
}
