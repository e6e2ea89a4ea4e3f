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
	vexp.CheckAVX2Registers()
}

// newConstTable is the kernels' table of constants.
func newConstTable() *vexp.ConstTable {
	c := vexp.NewConstTable(constSymbol)
	f := c.AddFloat
	f("one", 1)
	f("half", 0.5)
	f("negHalf", -0.5)
	f("clamp", geluClamp)
	f("negClamp", -geluClamp)
	c.Add("absMask", 0x7fffffff)
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
		v[i] = YMM()
	}
	return v
}

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

// e emits instruction f once per chain, with the chain's operands.
func e(f func(...Op), ops ...any) {
	for i := range chains {
		args := make([]Op, len(ops))
		for j, o := range ops {
			args[j] = pick(o, i)
		}
		f(args...)
	}
}

// vblendvps is VBLENDVPS in the variadic form of e.
func vblendvps(ops ...Op) { VBLENDVPS(ops[0], ops[1], ops[2], ops[3]) }

// poly evaluates c[first] + t·(c[first+1] + t·(... c[last])) by Horner's
// rule into new registers, c[j] the constant of c named prefix+j.
func poly(c *vexp.ConstTable, prefix string, first, last int, t V) V {
	p := newV()
	e(VMOVUPS, c.At(fmt.Sprint(prefix, last)), p)
	for j := last - 1; j >= first; j-- {
		e(VFMADD213PS, c.At(fmt.Sprint(prefix, j)), t, p) // p = t·p + c[j]
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
	e(VMOVUPS, c.At("clamp"), g.xu)
	e(VMINPS, x, g.xu, g.xu) // xu = min(x, clamp)
	g.xc = newV()
	e(VMOVUPS, c.At("negClamp"), g.xc)
	e(VMAXPS, g.xu, g.xc, g.xc)
	a := newV()
	e(VANDPS, c.At("absMask"), g.xc, a)

	// t = 1/d, d = 1 + k·a; dlo = fma(a, k, 1-d) is the rounding error of
	// d; corr = 1 - (d+dlo)·t to first order; cG = corr·G(t).
	one := newV()
	e(VMOVUPS, c.At("one"), one)
	d := newV()
	e(VMOVAPS, one, d)
	e(VFMADD231PS, c.At("k"), a, d) // d = a·k + 1
	g.t = newV()
	e(VDIVPS, d, one, g.t)
	dlo := newV()
	e(VSUBPS, d, one, dlo)            // 1 - d
	e(VFMADD231PS, c.At("k"), a, dlo) // dlo = a·k + (1-d)
	corr := one                       // one is not needed further
	e(VFNMADD231PS, g.t, d, corr)     // eps = 1 - d·t
	e(VFNMADD231PS, g.t, dlo, corr)   // corr = eps - dlo·t
	cG := poly(c, "g", 0, len(geluG)-1, g.t)
	e(VMULPS, corr, cG, cG)
	g.r = poly(c, "r", 0, len(geluR)-1, g.t)

	// exp(whi + wlo), whi + wlo = -a²/2 exactly.
	ma := newV()
	e(VMULPS, c.At("negHalf"), a, ma)
	whi := newV()
	e(VMULPS, a, ma, whi)
	wlo := newV()
	e(VMOVAPS, whi, wlo)
	e(VFMSUB231PS, a, ma, wlo) // wlo = ma·a - whi
	// f holds n = round(whi·log2e); r = whi - n·ln2 + wlo; ma is scratch.
	f, r := vexp.Reduce(c.At, whi, wlo, ma)
	g.pm1 = vexp.Expm1(c.At, r) // pm1 = exp(r) - 1

	// m = pm1 + cG + pm1·cG.
	g.m = newV()
	e(VADDPS, cG, g.pm1, g.m)
	e(VFMADD231PS, cG, g.pm1, g.m)

	// scale = 2^n: (bits(f) << 23) + 127<<23 (bits(magic) << 23 wraps to 0).
	vexp.Pow2(c.At, f)
	g.scale = f
	return g
}

// unroll is the vectors per main-loop trip; an odd last vector takes a
// second loop of one.
const unroll = 2

// genKernel generates geluAVX2 (grad false) or geluGradAVX2.
func genKernel(c *vexp.ConstTable, grad bool) {
	if grad {
		TEXT("geluGradAVX2", NOSPLIT, "func(dx, x, dy *float32, n int)")
		Doc("geluGradAVX2 sets dx[i] = dy[i]·GELU'(x[i]) for i < n, n a multiple of 8.")
	} else {
		TEXT("geluAVX2", NOSPLIT, "func(y, x *float32, n int)")
		Doc("geluAVX2 sets y[i] = GELU(x[i]) for i < n, n a multiple of 8.")
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
	SHRQ(Imm(3), n) // vectors
	trips := GP64()
	MOVQ(n, trips)
	SHRQ(Imm(1), trips)
	JZ(LabelRef("single"))
	Label("loop")
	chains = unroll
	genBody(c, grad, in, out, dy)
	DECQ(trips)
	JNZ(LabelRef("loop"))
	Label("single")
	TESTQ(U32(1), n)
	JZ(LabelRef("done"))
	chains = 1
	genBody(c, grad, in, out, dy)
	Label("done")
	VZEROUPPER()
	RET()
}

// genBody computes `chains` vectors from in (and dy) into out and advances
// the pointers.
func genBody(c *vexp.ConstTable, grad bool, in, out, dy reg.Register) {
	at := func(base reg.Register) perChain {
		return func(i int) Op { return Mem{Base: base, Disp: i * vexp.VecBytes} }
	}
	x := at(in)
	g := genTail(c, x)
	if grad {
		// neg: lanes with x < 0 (not -0, not NaN).
		neg := newV()
		e(VXORPS, neg, neg, neg)
		e(VCMPPS, Imm(0x1e), x, neg, neg) // GT_OQ: 0 > x
		// D = (q·(1+m) - xa·(1+pm1))·2^n, q = t·R, xa = |xc|/√(2π):
		// Φ(-|x|) - |x|·φ(x); the slope is D for x < 0, else 1 - D.
		q := newV()
		e(VMULPS, g.r, g.t, q)
		u := g.m
		e(VFMADD213PS, q, q, u) // u = q·m + q
		xa := g.xc
		e(VANDPS, c.At("absMask"), xa, xa)
		e(VMULPS, c.At("invSqrt2Pi"), xa, xa)
		v := g.pm1
		e(VFMADD213PS, xa, xa, v) // v = xa·pm1 + xa
		d := u
		e(VSUBPS, v, u, d)
		e(VMULPS, g.scale, d, d)
		phi := newV()
		e(VMOVUPS, c.At("one"), phi)
		e(VSUBPS, d, phi, phi)
		e(vblendvps, neg, d, phi, phi)
		e(VMULPS, at(dy), phi, phi)
		e(VMOVUPS, phi, at(out))
	} else {
		// P = xu·Φ(-|x|) = (X·R + (X·m + Xe)·R)·2^n, X = xu·t, Xe its
		// rounding error.
		X := newV()
		e(VMULPS, g.t, g.xu, X)
		xe := newV()
		e(VMOVAPS, X, xe)
		e(VFMSUB231PS, g.t, g.xu, xe) // xe = xu·t - X
		e(VFMADD231PS, g.m, X, xe)    // xe = X·m + xe
		e(VMULPS, g.r, xe, xe)
		e(VFMADD231PS, g.r, X, xe) // X·R + xe
		p := xe
		e(VMULPS, g.scale, p, p)
		// y = P where x's sign bit is set (x < 0, and -0 and negative NaNs,
		// which the erf branch or the NaN decide), else x - P.
		xr := newV()
		e(VMOVUPS, x, xr)
		ypos := X
		e(VSUBPS, p, xr, ypos)
		y := ypos
		e(vblendvps, xr, p, ypos, y)
		// s = x·x/2 < erfBound²/2: y = x/2 + s·Q(s).
		hx := newV()
		e(VMULPS, c.At("half"), xr, hx)
		sv := xr
		e(VMULPS, x, hx, sv)
		q := poly(c, "erf", 0, len(geluErf)-1, sv)
		e(VFMADD213PS, hx, sv, q) // q = s·q + hx
		small := hx
		e(VCMPPS, Imm(0x11), c.At("erfBoundS"), sv, small) // LT_OQ: s < erfBound²/2
		e(vblendvps, small, q, y, y)
		e(VMOVUPS, y, at(out))
	}
	step := U32(chains * vexp.VecBytes)
	ADDQ(step, in)
	ADDQ(step, out)
	if grad {
		ADDQ(step, dy)
	}
}
