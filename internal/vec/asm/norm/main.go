// Command norm generates the AVX2 LayerNorm row kernels of package vec
// (Moments, LNGradSums, LNRow, LNGradXRow, LNGradWAccum) with avo
// (github.com/mmcloughlin/avo). It lives in the module internal/vec/asm so
// that the main module does not depend on avo; `go generate` in
// internal/vec runs it:
//
//	go run -C asm/norm . -out ../../norm_amd64.s -stubs ../../norm_amd64_stubs.go -pkg vec
//
// Every kernel widens float32 to float64 with VCVTPS2PD (exact) and works
// in float64 with VADDPD/VSUBPD/VMULPD, never a fused multiply-add, so each
// operation is rounded once, as in the Go fallbacks of norm.go.
//
// The sum kernels take n a multiple of 4 and keep L float64 lanes per sum
// (L = 16 for momentsAVX2, 8 for lnGradSumsAVX2, in L/4 YMM accumulators):
// element j of each L-element chunk goes to lane j, then the remaining
// groups of 4 to lanes 0-3; the accumulators are combined as
// (A0+A1)+(A2+A3) (or A0+A1) and the 4 lanes of the result as
// (v0+v2)+(v1+v3). sumLanesGo in norm.go performs exactly these additions.
//
// The elementwise kernels take n a multiple of 8; the Go side runs the
// remaining elements through the fallbacks.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genMoments()
	genGradSums()
	genLNRow()
	genGradXRow()
	genGradWAccum()
	Generate()
}

// at addresses base + i + disp (i in bytes).
func at(base, i reg.Register, disp int) Mem {
	return Mem{Base: base, Index: i, Scale: 1, Disp: disp}
}

// zeros returns k zeroed YMM registers.
func zeros(k int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, k)
	for j := range v {
		v[j] = YMM()
		VXORPD(v[j], v[j], v[j])
	}
	return v
}

// broadcast loads the float64 parameter name into all 4 lanes of a YMM,
// straight from memory. Loading it first with a legacy-SSE MOVSD (as
// avo's Load does) made every call far slower on the AMD EPYC (Zen 3) VM
// this was tuned on: 142 ns instead of 20 for an 8-element lnRowAVX2 with
// its 2 parameters, 430 instead of 21 for lnGradXRowAVX2 with 4.
func broadcast(name string) reg.VecVirtual {
	p, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	y := YMM()
	VBROADCASTSD(p.Addr, y)
	return y
}

// ret stores the low float64 of x as result k with VMOVSD (VEX), so the
// kernels execute no legacy-SSE instruction.
func ret(k int, x reg.VecVirtual) {
	p, err := ReturnIndex(k).Resolve()
	if err != nil {
		panic(err)
	}
	VMOVSD(x, p.Addr)
}

// combine adds the accumulators of one sum as (A0+A1)+(A2+A3) (or A0+A1)
// and then the 4 lanes as (v0+v2)+(v1+v3); it returns an XMM whose low
// lane holds the sum. It overwrites the accumulators.
func combine(a []reg.VecVirtual) reg.VecVirtual {
	switch len(a) {
	case 4:
		VADDPD(a[1], a[0], a[0])
		VADDPD(a[3], a[2], a[2])
		VADDPD(a[2], a[0], a[0])
	case 2:
		VADDPD(a[1], a[0], a[0])
	default:
		panic("combine: need 2 or 4 accumulators")
	}
	hi, lo, sw, r := XMM(), XMM(), XMM(), XMM()
	VEXTRACTF128(Imm(1), a[0], hi)
	VADDPD(hi, a[0].AsX(), lo) // (v0+v2, v1+v3)
	VPERMILPD(Imm(1), lo, sw)  // (v1+v3, v0+v2)
	VADDSD(sw, lo, r)
	return r
}

// genMoments generates momentsAVX2: Σx and Σx² in 16 lanes.
func genMoments() {
	TEXT("momentsAVX2", NOSPLIT, "func(x *float32, n int) (s, ss float64)")
	Pragma("noescape")
	Doc("momentsAVX2 returns Σx and Σx² of x[:n] (n a multiple of 4) in float64, summed in 16 lanes (see norm.go).")
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), n) // bytes
	big := GP64()   // bytes in whole 16-element chunks
	MOVQ(n, big)
	ANDQ(U32(^uint32(16*4-1)), big)
	s, q := zeros(4), zeros(4)
	v := make([]reg.VecVirtual, 4)
	for k := range v {
		v[k] = YMM()
	}
	t := YMM()
	i := GP64()
	XORQ(i, i)
	TESTQ(big, big)
	JZ(LabelRef("mom_four"))
	Label("mom_loop")
	for k := range v {
		VCVTPS2PD(at(x, i, 16*k), v[k])
	}
	for k := range v {
		VADDPD(v[k], s[k], s[k])
		VMULPD(v[k], v[k], t)
		VADDPD(t, q[k], q[k])
	}
	ADDQ(U32(64), i)
	CMPQ(i, big)
	JB(LabelRef("mom_loop"))
	Label("mom_four")
	CMPQ(i, n)
	JAE(LabelRef("mom_sum"))
	VCVTPS2PD(at(x, i, 0), v[0])
	VADDPD(v[0], s[0], s[0])
	VMULPD(v[0], v[0], t)
	VADDPD(t, q[0], q[0])
	ADDQ(U32(16), i)
	JMP(LabelRef("mom_four"))
	Label("mom_sum")
	rs := combine(s)
	rq := combine(q)
	VZEROUPPER()
	ret(0, rs)
	ret(1, rq)
	RET()
}

// genGradSums generates lnGradSumsAVX2: Σx, Σx², Σg, Σg·x with
// g = dy·w, in 8 lanes each.
func genGradSums() {
	TEXT("lnGradSumsAVX2", NOSPLIT, "func(x, w, dy *float32, n int) (sx, sxx, sg, sgx float64)")
	Pragma("noescape")
	Doc("lnGradSumsAVX2 returns Σx, Σx², Σg and Σg·x over x, w, dy[:n] (n a multiple of 4), g = dy·w, in float64, summed in 8 lanes (see norm.go).")
	x := Load(Param("x"), GP64())
	w := Load(Param("w"), GP64())
	dy := Load(Param("dy"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), n)
	big := GP64() // bytes in whole 8-element chunks
	MOVQ(n, big)
	ANDQ(U32(^uint32(8*4-1)), big)
	sx, sxx, sg, sgx := zeros(2), zeros(2), zeros(2), zeros(2)
	xv := []reg.VecVirtual{YMM(), YMM()}
	gv := []reg.VecVirtual{YMM(), YMM()}
	wv, t := YMM(), YMM()
	// step accumulates the group of 4 at byte offset disp into lanes
	// 4k..4k+3.
	step := func(k, disp int, i reg.Register) {
		VCVTPS2PD(at(x, i, disp), xv[k])
		VCVTPS2PD(at(dy, i, disp), gv[k])
		VCVTPS2PD(at(w, i, disp), wv)
		VMULPD(wv, gv[k], gv[k]) // g = dy·w
		VADDPD(xv[k], sx[k], sx[k])
		VMULPD(xv[k], xv[k], t)
		VADDPD(t, sxx[k], sxx[k])
		VADDPD(gv[k], sg[k], sg[k])
		VMULPD(xv[k], gv[k], t)
		VADDPD(t, sgx[k], sgx[k])
	}
	i := GP64()
	XORQ(i, i)
	TESTQ(big, big)
	JZ(LabelRef("gs_four"))
	Label("gs_loop")
	step(0, 0, i)
	step(1, 16, i)
	ADDQ(U32(32), i)
	CMPQ(i, big)
	JB(LabelRef("gs_loop"))
	Label("gs_four")
	CMPQ(i, n)
	JAE(LabelRef("gs_sum"))
	step(0, 0, i)
	ADDQ(U32(16), i)
	JMP(LabelRef("gs_four"))
	Label("gs_sum")
	r := []reg.VecVirtual{combine(sx), combine(sxx), combine(sg), combine(sgx)}
	VZEROUPPER()
	for k, v := range r {
		ret(k, v)
	}
	RET()
}

// elementLoop emits a loop over n (a multiple of 8, in elements), 16
// floats per trip and then 8 if left: body(i, off) handles the 32 bytes at
// byte offset i+off.
func elementLoop(prefix string, n reg.Register, body func(i reg.Register, off int)) {
	SHLQ(Imm(2), n)
	big := GP64() // bytes in whole 16-float trips
	MOVQ(n, big)
	ANDQ(U32(^uint32(2*vecBytes-1)), big)
	i := GP64()
	XORQ(i, i)
	TESTQ(big, big)
	JZ(LabelRef(prefix + "_one"))
	Label(prefix + "_loop")
	body(i, 0)
	body(i, vecBytes)
	ADDQ(U32(2*vecBytes), i)
	CMPQ(i, big)
	JB(LabelRef(prefix + "_loop"))
	Label(prefix + "_one")
	CMPQ(i, n)
	JAE(LabelRef(prefix + "_done"))
	body(i, 0)
	Label(prefix + "_done")
	VZEROUPPER()
	RET()
}

// vecBytes is the size of one YMM vector in bytes.
const vecBytes = 32

// narrow rounds the float64 vectors lo and hi to float32 and returns them
// as one YMM (lo in the low half).
func narrow(lo, hi reg.VecVirtual) reg.VecVirtual {
	r, h := YMM(), XMM()
	VCVTPD2PSY(lo, r.AsX())
	VCVTPD2PSY(hi, h)
	VINSERTF128(Imm(1), h, r, r)
	return r
}

// genLNRow generates lnRowAVX2.
func genLNRow() {
	TEXT("lnRowAVX2", NOSPLIT, "func(y, x, w, b *float32, n int, mean, rstd float64)")
	Pragma("noescape")
	Doc("lnRowAVX2 sets y[c] = float32((float64(x[c])-mean)*rstd)*w[c] + b[c] for c < n (n a multiple of 8), every operation rounded.")
	y := Load(Param("y"), GP64())
	x := Load(Param("x"), GP64())
	w := Load(Param("w"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	mean, rstd := broadcast("mean"), broadcast("rstd")
	elementLoop("lnrow", n, func(i reg.Register, off int) {
		h := []reg.VecVirtual{YMM(), YMM()}
		for k := range h {
			VCVTPS2PD(at(x, i, off+16*k), h[k])
			VSUBPD(mean, h[k], h[k])
			VMULPD(rstd, h[k], h[k])
		}
		r := narrow(h[0], h[1])
		VMULPS(at(w, i, off), r, r)
		VADDPS(at(b, i, off), r, r)
		VMOVUPS(r, at(y, i, off))
	})
}

// genGradXRow generates lnGradXRowAVX2.
func genGradXRow() {
	TEXT("lnGradXRowAVX2", NOSPLIT, "func(dx, x, w, dy *float32, n int, mean, rstd, sg, sgx float64)")
	Pragma("noescape")
	Doc("lnGradXRowAVX2 sets dx[c] = float32(rstd*(g-sg-xhat*sgx)), g = float64(dy[c])*float64(w[c]), xhat = (float64(x[c])-mean)*rstd, for c < n (n a multiple of 8), every operation rounded.")
	dx := Load(Param("dx"), GP64())
	x := Load(Param("x"), GP64())
	w := Load(Param("w"), GP64())
	dy := Load(Param("dy"), GP64())
	n := Load(Param("n"), GP64())
	mean, rstd := broadcast("mean"), broadcast("rstd")
	sg, sgx := broadcast("sg"), broadcast("sgx")
	elementLoop("gradx", n, func(i reg.Register, off int) {
		h := []reg.VecVirtual{YMM(), YMM()}
		for k := range h {
			g, wv := YMM(), YMM()
			VCVTPS2PD(at(dy, i, off+16*k), g)
			VCVTPS2PD(at(w, i, off+16*k), wv)
			VMULPD(wv, g, g) // g = dy·w
			VCVTPS2PD(at(x, i, off+16*k), h[k])
			VSUBPD(mean, h[k], h[k])
			VMULPD(rstd, h[k], h[k]) // xhat
			VMULPD(sgx, h[k], h[k])  // xhat·sgx
			VSUBPD(sg, g, g)         // g - sg
			VSUBPD(h[k], g, h[k])    // (g - sg) - xhat·sgx
			VMULPD(rstd, h[k], h[k])
		}
		r := narrow(h[0], h[1])
		VMOVUPS(r, at(dx, i, off))
	})
}

// genGradWAccum generates lnGradWAccumAVX2.
func genGradWAccum() {
	TEXT("lnGradWAccumAVX2", NOSPLIT, "func(acc *float64, x, dy *float32, n int, mean, rstd float64)")
	Pragma("noescape")
	Doc("lnGradWAccumAVX2 adds acc[c] += float64(dy[c])*(float64(x[c])-mean)*rstd for c < n (n a multiple of 8), every operation rounded, left to right.")
	acc := Load(Param("acc"), GP64())
	x := Load(Param("x"), GP64())
	dy := Load(Param("dy"), GP64())
	n := Load(Param("n"), GP64())
	mean, rstd := broadcast("mean"), broadcast("rstd")
	elementLoop("gradw", n, func(i reg.Register, off int) {
		// i is the byte offset into the float32 rows; acc is twice as
		// wide, so it is addressed with scale 2.
		for k := 0; k < 2; k++ {
			d, p := YMM(), YMM()
			VCVTPS2PD(at(x, i, off+16*k), d)
			VSUBPD(mean, d, d)
			VCVTPS2PD(at(dy, i, off+16*k), p)
			VMULPD(d, p, p) // dy·(x-mean)
			VMULPD(rstd, p, p)
			m := Mem{Base: acc, Index: i, Scale: 2, Disp: 2*off + 32*k}
			VADDPD(m, p, p)
			VMOVUPD(p, m)
		}
	})
}
