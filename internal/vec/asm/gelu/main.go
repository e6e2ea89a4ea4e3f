// Command gelu generates the AVX2+FMA kernels of package vec's GELU and
// GELUGrad (the exact, erf-based GELU) with avo
// (github.com/mmcloughlin/avo). It lives in the module internal/vec/asm so
// that the main module does not depend on avo; `go generate` in
// internal/vec runs it:
//
//	go run -C asm/gelu . -out ../../gelu_amd64.s -stubs ../../gelu_amd64_stubs.go -pkg vec
//
// The kernels handle whole vectors of 8 (n a multiple of 8); the Go side
// pads the last partial vector on the stack, so that every element goes
// through the same code. The algorithm and its constants are those of
// vec's pure-Go fallback (internal/vec/gelu.go, which explains them);
// fit.go refits the polynomials (`go run . -fit`).
//
// The main loop runs two vectors in lockstep (the dependency chain of one
// vector, a division and three polynomials, is about 80 cycles long), which
// takes all 16 YMM registers. avo's allocator knows the 32 of AVX-512, so
// the generator checks its output for registers beyond Y15 and fails
// rather than emit code that would fault on an AVX2 machine.
//
// With -wide it generates the AVX-512F kernels instead (geluAVX512,
// geluGradAVX512, into gelu512_amd64.s): the same instructions lane by
// lane on vectors of 16, constants broadcast from their first copy, the
// blends on mask registers, and three vectors in lockstep in the 32 ZMM
// registers. The kernel is bound by that chain's latency, not by
// throughput, so even where a ZMM instruction issues as two YMM halves
// (Zen 4) the wider, longer lockstep runs it faster.
//
//	go run -C asm/gelu . -wide -out ../../gelu512_amd64.s -stubs ../../gelu512_amd64_stubs.go -pkg vec
package main

import (
	"flag"
	"fmt"

	"gptlab/internal/vec/asm/internal/vexp"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The constants, as in internal/vec/gelu.go.
const (
	geluClamp  = 13.25
	geluK      = 0.3
	erfBound   = 0.75
	log2e      = 1.442695040888963
	roundMagic = 0x1.8p23
	invSqrt2Pi = 0.3989422804014327
)

var (
	ln2Hi   = float32(0.6931471805599453)
	ln2Lo   = float32(-1.9046542e-09)
	geluR   = []float32{0.119685, 0.11960662, 0.10992912, 0.07990552, 0.09150309, -0.07022055, 0.18004525, -0.21888518, 0.10823871, -0.019807573}
	geluExp = []float32{1, 0.49999997, 0.1666653, 0.041667774, 0.008367849, 0.001384025}
	geluErf = []float32{0.7978846, -0.26596388, 0.07982745, -0.019180099, 0.0037944168}
	geluG   = []float32{0.8406503, 1.801386, 0.054121792}
)

// constSymbol names the kernels' constants.
const constSymbol = "geluconst"

func main() {
	fit := flag.Bool("fit", false, "refit the polynomials and print them instead of generating")
	flag.BoolVar(&wide, "wide", false, "generate the AVX-512F kernels (ZMM) instead of the AVX2 ones")
	flag.Parse()
	if *fit {
		fitAll()
		return
	}
	ConstraintExpr("amd64,!purego")
	consts := newConstTable()
	genKernel(consts, false)
	genKernel(consts, true)
	consts.Emit()
	Generate()
	if !wide {
		vexp.CheckAVX2Registers()
	}
}

// wide selects the AVX-512F kernels: ZMM registers, vectors of 16.
var wide bool

// suffix is the kernels' name suffix, lanes their vector's length and
// vecBytes its size.
func suffix() string {
	if wide {
		return "AVX512"
	}
	return "AVX2"
}

func lanes() int { return vecBytes() / 4 }

func vecBytes() int {
	if wide {
		return 64
	}
	return vexp.VecBytes
}

// newConstTable is the kernels' table of constants.
func newConstTable() *vexp.ConstTable {
	sym := constSymbol
	if wide {
		sym = "gelu512const"
	}
	c := vexp.NewConstTable(sym)
	f := c.AddFloat
	f("one", 1)
	f("half", 0.5)
	f("negHalf", -0.5)
	f("clamp", geluClamp)
	f("negClamp", -geluClamp)
	c.Add("absMask", 0x7fffffff)
	if wide {
		c.Add("signMask", 0x80000000) // the AVX2 blends read sign bits themselves
	}
	c.Add("expBias", 127<<23)
	f("k", geluK)
	f("erfBoundS", erfBound*erfBound/2)
	f("log2e", log2e)
	f("magic", roundMagic)
	f("negLn2Hi", -ln2Hi)
	f("negLn2Lo", -ln2Lo)
	f("invSqrt2Pi", invSqrt2Pi)
	for j, v := range geluR {
		f(fmt.Sprint("r", j), v)
	}
	for j, v := range geluExp {
		f(fmt.Sprint("e", j+1), v)
	}
	for j, v := range geluErf {
		f(fmt.Sprint("erf", j), v)
	}
	for j, v := range geluG {
		f(fmt.Sprint("g", j), v)
	}
	return c
}

// V is one vector register per interleaved chain: the kernels run
// `chains` independent vectors in lockstep, so that the long dependency
// chain of one vector (a division and three polynomials) overlaps the
// others'.
type V []reg.VecVirtual

// chains is the number of vectors in flight in the code being generated.
var chains int

// newV allocates one register per chain.
func newV() V {
	v := make(V, chains)
	for i := range v {
		if wide {
			v[i] = ZMM()
		} else {
			v[i] = YMM()
		}
	}
	return v
}

// cst is a constant of the table as an operand: on YMM the whole vector in
// memory, on ZMM its first copy, broadcast (the instruction's _BCST form).
type cst struct{ m Mem }

// k is constant name of the table c.
func k(c *vexp.ConstTable, name string) cst { return cst{c.At(name)} }

// in is an instruction in its plain form and, for a broadcast constant
// operand on ZMM, its _BCST form.
type in struct{ plain, bcst func(...Op) }

var (
	vmulps      = in{VMULPS, VMULPS_BCST}
	vaddps      = in{VADDPS, VADDPS_BCST}
	vsubps      = in{VSUBPS, VSUBPS_BCST}
	vminps      = in{VMINPS, VMINPS_BCST}
	vmaxps      = in{VMAXPS, VMAXPS_BCST}
	vdivps      = in{VDIVPS, VDIVPS_BCST}
	vfmadd213ps = in{VFMADD213PS, VFMADD213PS_BCST}
	vfmadd231ps = in{VFMADD231PS, VFMADD231PS_BCST}
	vfmsub231ps = in{VFMSUB231PS, VFMSUB231PS_BCST}
	vfnmadd231  = in{VFNMADD231PS, VFNMADD231PS_BCST}
	vmovaps     = in{VMOVAPS, nil}
	vmovups     = in{VMOVUPS, nil}
	// vandps is a bitwise AND: VANDPS on YMM, VPANDD on ZMM (VANDPS on
	// ZMM needs AVX512DQ).
	vandps = in{VANDPS, VPANDD_BCST}
)

// perChain is an operand that differs by chain, such as the chain's vector
// of an input.
type perChain func(i int) Op

// pick returns operand o of chain i: a V's register, a perChain's operand,
// or o itself (a constant's memory, an immediate).
func pick(o any, i int) Op {
	switch v := o.(type) {
	case V:
		return v[i]
	case perChain:
		return v(i)
	}
	return o.(Op)
}

// e emits instruction f once per chain, with the chain's operands: its
// _BCST form on ZMM when one is a constant, and a constant loaded into a
// register (VMOVUPS) is broadcast there (VBROADCASTSS).
func e(f in, ops ...any) {
	bcst := false
	for j, o := range ops {
		if c, ok := o.(cst); ok {
			ops[j], bcst = c.m, wide
		}
	}
	fn := f.plain
	if bcst {
		fn = f.bcst
		if fn == nil { // a load: VMOVUPS of a constant
			fn = VBROADCASTSS
		}
	}
	for i := range chains {
		args := make([]Op, len(ops))
		for j, o := range ops {
			args[j] = pick(o, i)
		}
		fn(args...)
	}
}

// mask is one selector per chain for blend: a YMM whose lanes' sign bits
// select (AVX2), or a mask register (AVX-512).
type mask []Op

// asMask is the registers v as a mask (the AVX2 selector).
func asMask(v V) mask {
	m := make(mask, len(v))
	for i, r := range v {
		m[i] = r
	}
	return m
}

// masks is a new mask register per chain, and the operand of chain i.
func masks() (mask, perChain) {
	m := make(mask, chains)
	for i := range m {
		m[i] = K()
	}
	return m, func(i int) Op { return m[i] }
}

// signMask is the lanes of x whose sign bit is set.
func signMask(c *vexp.ConstTable, x V) mask {
	if !wide {
		return asMask(x)
	}
	m, op := masks()
	e(in{VPTESTMD, VPTESTMD_BCST}, k(c, "signMask"), x, op)
	return m
}

// cmpMask is the lanes where VCMPPS's predicate pred holds, with a as its
// second operand (a memory or constant) and b its first: into the
// registers dst on AVX2, into new mask registers on AVX-512 (dst unused).
func cmpMask(pred uint64, a any, b V, dst V) mask {
	if !wide {
		e(in{VCMPPS, nil}, Imm(pred), a, b, dst)
		return asMask(dst)
	}
	m, op := masks()
	e(in{VCMPPS, VCMPPS_BCST}, Imm(pred), a, b, op)
	return m
}

// blend sets dst = sel ? a : b lane by lane.
func blend(sel mask, a, b, dst V) {
	for i := range chains {
		if wide {
			VBLENDMPS(a[i], b[i], sel[i], dst[i])
		} else {
			VBLENDVPS(sel[i], a[i], b[i], dst[i])
		}
	}
}

// zero sets v to +0 in every lane.
func zero(v V) {
	x := VXORPS
	if wide {
		x = VPXORD
	}
	for i := range chains {
		x(v[i], v[i], v[i])
	}
}

// poly evaluates c[first] + t·(c[first+1] + t·(... c[last])) by Horner's
// rule into new registers, c[j] the constant of c named prefix+j.
func poly(c *vexp.ConstTable, prefix string, first, last int, t V) V {
	p := newV()
	e(vmovups, k(c, fmt.Sprint(prefix, last)), p)
	for j := last - 1; j >= first; j-- {
		e(vfmadd213ps, k(c, fmt.Sprint(prefix, j)), t, p) // p = t·p + c[j]
	}
	return p
}

// tail holds the registers of the erfc branch (see geluTail in
// internal/vec/gelu.go).
type tail struct {
	xu, xc, t, r, m, pm1, scale V // xu = min(x, clamp), xc = max(xu, -clamp)
}

// genTail computes the erfc-branch quantities of the vectors x.
func genTail(c *vexp.ConstTable, x perChain) tail {
	var g tail
	// xc = max(min(x, clamp), -clamp); x is the operand returned on NaN.
	g.xu = newV()
	e(vmovups, k(c, "clamp"), g.xu)
	e(vminps, x, g.xu, g.xu) // xu = min(x, clamp)
	g.xc = newV()
	e(vmovups, k(c, "negClamp"), g.xc)
	e(vmaxps, g.xu, g.xc, g.xc)
	a := newV()
	e(vandps, k(c, "absMask"), g.xc, a)

	// t = 1/d, d = 1 + k·a; dlo = fma(a, k, 1-d) is the rounding error of
	// d; corr = 1 - (d+dlo)·t to first order; cG = corr·G(t).
	one := newV()
	e(vmovups, k(c, "one"), one)
	d := newV()
	e(vmovaps, one, d)
	e(vfmadd231ps, k(c, "k"), a, d) // d = a·k + 1
	g.t = newV()
	e(vdivps, d, one, g.t)
	dlo := newV()
	e(vsubps, d, one, dlo)            // 1 - d
	e(vfmadd231ps, k(c, "k"), a, dlo) // dlo = a·k + (1-d)
	corr := one                       // one is not needed further
	e(vfnmadd231, g.t, d, corr)       // eps = 1 - d·t
	e(vfnmadd231, g.t, dlo, corr)     // corr = eps - dlo·t
	cG := poly(c, "g", 0, len(geluG)-1, g.t)
	e(vmulps, corr, cG, cG)
	g.r = poly(c, "r", 0, len(geluR)-1, g.t)

	// exp(whi + wlo), whi + wlo = -a²/2 exactly.
	ma := newV()
	e(vmulps, k(c, "negHalf"), a, ma)
	whi := newV()
	e(vmulps, a, ma, whi)
	wlo := newV()
	e(vmovaps, whi, wlo)
	e(vfmsub231ps, a, ma, wlo) // wlo = ma·a - whi
	// f holds n = round(whi·log2e); r = whi - n·ln2 + wlo; ma is scratch.
	f, r := vexp.Reduce(c.At, whi, wlo, ma)
	g.pm1 = vexp.Expm1(c.At, r) // pm1 = exp(r) - 1

	// m = pm1 + cG + pm1·cG.
	g.m = newV()
	e(vaddps, cG, g.pm1, g.m)
	e(vfmadd231ps, cG, g.pm1, g.m)

	// scale = 2^n: (bits(f) << 23) + 127<<23 (bits(magic) << 23 wraps to 0).
	vexp.Pow2(c.At, f)
	g.scale = f
	return g
}

// unroll is the vectors per main-loop trip (unrollWide on ZMM); the
// vectors left over take a second loop of one.
const (
	unroll     = 2
	unrollWide = 3 // four do not fit the 32 ZMM registers
)

// genKernel generates geluAVX2 (grad false) or geluGradAVX2.
func genKernel(c *vexp.ConstTable, grad bool) {
	sfx, l := suffix(), lanes()
	if grad {
		TEXT("geluGrad"+sfx, NOSPLIT, "func(dx, x, dy *float32, n int)")
		Doc(fmt.Sprintf("geluGrad%s sets dx[i] = dy[i]·GELU'(x[i]) for i < n, n a multiple of %d.", sfx, l))
	} else {
		TEXT("gelu"+sfx, NOSPLIT, "func(y, x *float32, n int)")
		Doc(fmt.Sprintf("gelu%s sets y[i] = GELU(x[i]) for i < n, n a multiple of %d.", sfx, l))
	}
	Pragma("noescape")
	var out, in, dy reg.Register
	if grad {
		out = Load(Param("dx"), GP64())
		dy = Load(Param("dy"), GP64())
	} else {
		out = Load(Param("y"), GP64())
	}
	in = Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	u := unroll
	if wide {
		u = unrollWide
	}
	shift := uint64(3) // vectors of 8
	if wide {
		shift = 4
	}
	SHRQ(Imm(shift), n) // vectors
	Label("loop")
	CMPQ(n, U32(u))
	JB(LabelRef("rest"))
	chains = u
	genBody(c, grad, in, out, dy)
	SUBQ(U32(u), n)
	JMP(LabelRef("loop"))
	Label("rest")
	TESTQ(n, n) // the vectors left over, one at a time
	JZ(LabelRef("done"))
	Label("single")
	chains = 1
	genBody(c, grad, in, out, dy)
	DECQ(n)
	JNZ(LabelRef("single"))
	Label("done")
	VZEROUPPER()
	RET()
}

// genBody computes `chains` vectors from in (and dy) into out and advances
// the pointers.
func genBody(c *vexp.ConstTable, grad bool, in, out, dy reg.Register) {
	at := func(base reg.Register) perChain {
		return func(i int) Op { return Mem{Base: base, Disp: i * vecBytes()} }
	}
	x := at(in)
	g := genTail(c, x)
	if grad {
		// neg: lanes with x < 0 (not -0, not NaN).
		zr := newV()
		zero(zr)
		neg := cmpMask(0x1e, x, zr, zr) // GT_OQ: 0 > x
		// D = (q·(1+m) - xa·(1+pm1))·2^n, q = t·R, xa = |xc|/√(2π):
		// Φ(-|x|) - |x|·φ(x); the slope is D for x < 0, else 1 - D.
		q := newV()
		e(vmulps, g.r, g.t, q)
		u := g.m
		e(vfmadd213ps, q, q, u) // u = q·m + q
		xa := g.xc
		e(vandps, k(c, "absMask"), xa, xa)
		e(vmulps, k(c, "invSqrt2Pi"), xa, xa)
		v := g.pm1
		e(vfmadd213ps, xa, xa, v) // v = xa·pm1 + xa
		d := u
		e(vsubps, v, u, d)
		e(vmulps, g.scale, d, d)
		phi := newV()
		e(vmovups, k(c, "one"), phi)
		e(vsubps, d, phi, phi)
		blend(neg, d, phi, phi)
		e(vmulps, at(dy), phi, phi)
		e(vmovups, phi, at(out))
	} else {
		// P = xu·Φ(-|x|) = (X·R + (X·m + Xe)·R)·2^n, X = xu·t, Xe its
		// rounding error.
		X := newV()
		e(vmulps, g.t, g.xu, X)
		xe := newV()
		e(vmovaps, X, xe)
		e(vfmsub231ps, g.t, g.xu, xe) // xe = xu·t - X
		e(vfmadd231ps, g.m, X, xe)    // xe = X·m + xe
		e(vmulps, g.r, xe, xe)
		e(vfmadd231ps, g.r, X, xe) // X·R + xe
		p := xe
		e(vmulps, g.scale, p, p)
		// y = P where x's sign bit is set (x < 0, and -0 and negative NaNs,
		// which the erf branch or the NaN decide), else x - P.
		xr := newV()
		e(vmovups, x, xr)
		ypos := X
		e(vsubps, p, xr, ypos)
		y := ypos
		blend(signMask(c, xr), p, ypos, y)
		// s = x·x/2 < erfBound²/2: y = x/2 + s·Q(s).
		hx := newV()
		e(vmulps, k(c, "half"), xr, hx)
		sv := xr
		e(vmulps, x, hx, sv)
		q := poly(c, "erf", 0, len(geluErf)-1, sv)
		e(vfmadd213ps, hx, sv, q)                         // q = s·q + hx
		small := cmpMask(0x11, k(c, "erfBoundS"), sv, hx) // LT_OQ: s < erfBound²/2
		blend(small, q, y, y)
		e(vmovups, y, at(out))
	}
	step := U32(chains * vecBytes())
	ADDQ(step, in)
	ADDQ(step, out)
	if grad {
		ADDQ(step, dy)
	}
}
