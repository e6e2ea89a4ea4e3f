// Command basic generates the AVX2 kernels of package vec's basic
// elementwise ops (Add, Mul, AddRow, AccumF64, AccumRowsF64,
// AccumRowsBF16F64, AdamW.Update), and AVX-512 ones of the two column
// sums (AccumRowsF64, AccumRowsBF16F64), with avo
// (github.com/mmcloughlin/avo). It lives in the module internal/vec/asm so
// that the main module does not depend on avo; `go generate` in
// internal/vec runs it:
//
//	go run -C asm/basic . -out ../../basic_amd64.s -stubs ../../basic_amd64_stubs.go -pkg vec
//
// The kernels handle whole vectors only (n a multiple of 8, or of 4 for
// accumF64AVX2 and the AVX2 column sums); the Go side runs the remaining
// elements through the pure-Go fallbacks, which perform the same IEEE
// operations in the same order. No kernel uses a fused multiply-add:
// every product is rounded to float32 before the sum, so the results are
// bitwise those of the Go code.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,!purego")
	genBinary("add", "+", VADDPS)
	genBinary("mul", "·", VMULPS)
	genAddRow()
	genAccumF64()
	genAccumRows(false, false)
	genAccumRows(true, false)
	genAccumRows(false, true)
	genAccumRows(true, true)
	genAdamW()
	Generate()
}

// vecBytes is the size of one YMM vector in bytes.
const vecBytes = 32

// unroll is the vectors per main-loop trip of the memory-bound kernels.
const unroll = 4

// genBinary generates NAMEAVX2: dst[i] = a[i] op b[i] for i < n, n a
// multiple of 8 (sign is op's symbol in the doc).
func genBinary(name, sign string, op func(...Op)) {
	TEXT(name+"AVX2", NOSPLIT, "func(dst, a, b *float32, n int)")
	Pragma("noescape")
	Doc(name + "AVX2 sets dst[i] = a[i] " + sign + " b[i] for i < n (n a multiple of 8).")
	dst := Load(Param("dst"), GP64())
	a := Load(Param("a"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), n) // bytes
	big := GP64()   // bytes handled by the unrolled loop
	MOVQ(n, big)
	ANDQ(U32(^uint32(unroll*vecBytes-1)), big)
	i := GP64()
	XORQ(i, i)
	x := make([]reg.VecVirtual, unroll)
	for u := range x {
		x[u] = YMM()
	}
	emitBinary(name, op, dst, a, b, i, big, n, x, name+"_done")
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// emitBinary emits dst[i:n] = a[i:n] op b[i:n], i and n in bytes (i from its
// current value): len(v) vectors a trip while i < big (n rounded down to
// whole trips), then one vector at a time; then it jumps to the label
// done. Its own labels start with prefix.
func emitBinary(prefix string, op func(...Op), dst, a, b, i, big, n reg.Register, v []reg.VecVirtual, done string) {
	TESTQ(big, big)
	JZ(LabelRef(prefix + "_one"))
	Label(prefix + "_loop")
	for u := range v {
		VMOVUPS(Mem{Base: a, Index: i, Scale: 1, Disp: u * vecBytes}, v[u])
	}
	for u := range v {
		op(Mem{Base: b, Index: i, Scale: 1, Disp: u * vecBytes}, v[u], v[u])
	}
	for u := range v {
		VMOVUPS(v[u], Mem{Base: dst, Index: i, Scale: 1, Disp: u * vecBytes})
	}
	ADDQ(U32(len(v)*vecBytes), i)
	CMPQ(i, big)
	JB(LabelRef(prefix + "_loop"))
	Label(prefix + "_one")
	CMPQ(i, n)
	JAE(LabelRef(done))
	VMOVUPS(Mem{Base: a, Index: i, Scale: 1}, v[0])
	op(Mem{Base: b, Index: i, Scale: 1}, v[0], v[0])
	VMOVUPS(v[0], Mem{Base: dst, Index: i, Scale: 1})
	ADDQ(U32(vecBytes), i)
	JMP(LabelRef(prefix + "_one"))
}

// genAddRow generates addRowAVX2: for r < rows and c < cols,
// dst[r*ld+c] = x[r*ld+c] + b[c], cols a multiple of 8. Each vector of b
// is reloaded from memory (L1) with its row vector.
func genAddRow() {
	TEXT("addRowAVX2", NOSPLIT, "func(dst, x, b *float32, rows, cols, ld int)")
	Pragma("noescape")
	Doc("addRowAVX2 sets dst[r*ld+c] = x[r*ld+c] + b[c] for r < rows, c < cols (cols a multiple of 8).")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	b := Load(Param("b"), GP64())
	rows := Load(Param("rows"), GP64())
	cols := Load(Param("cols"), GP64())
	SHLQ(Imm(2), cols) // bytes of a row's vectors
	ld := Load(Param("ld"), GP64())
	SHLQ(Imm(2), ld)
	big := GP64()
	MOVQ(cols, big)
	ANDQ(U32(^uint32(unroll*vecBytes-1)), big)
	i := GP64()
	v := make([]reg.VecVirtual, unroll)
	for u := range v {
		v[u] = YMM()
	}
	TESTQ(rows, rows)
	JZ(LabelRef("addrow_done"))
	Label("addrow_row")
	XORQ(i, i)
	emitBinary("addrow", VADDPS, dst, x, b, i, big, cols, v, "addrow_next")
	Label("addrow_next")
	ADDQ(ld, x)
	ADDQ(ld, dst)
	DECQ(rows)
	JNZ(LabelRef("addrow_row"))
	Label("addrow_done")
	VZEROUPPER()
	RET()
}

// genAccumRows generates accumRowsF64AVX2 (x float32) and, with bf16,
// accumRowsBF16F64AVX2 (x bf16 bits, each widened exactly: its 16 bits
// above 16 zero bits): acc[i] += float64(x[r*ldx+i]) for r < rows in
// order, for i < n (n a multiple of 4). Columns go 32 at a time (eight YMM
// of float64 sums kept in registers down the rows), then 4 at a time;
// each sum takes the rows in order, as accumF64AVX2 row by row would, so
// the bits are those of that loop on x's float32 values. With wide, the
// kernels are the AVX-512 ones (accumRowsF64AVX512,
// accumRowsBF16F64AVX512; AVX-512F): the same sums, 8 values a vector,
// columns 128 at a time (16 ZMM of sums), then 64, then 8 (n a multiple
// of 8).
func genAccumRows(bf16, wide bool) {
	name, elem, size, prefix := "accumRowsF64", "float32", 4, "accrows"
	if bf16 {
		name, elem, size, prefix = "accumRowsBF16F64", "uint16", 2, "accrows16_"
	}
	isa, per, widths, vec, half := "AVX2", 4, []int{32, 4}, YMM, reg.VecVirtual.AsX
	if wide {
		isa, per, widths, vec, half = "AVX512", 8, []int{128, 64, 8}, ZMM, reg.VecVirtual.AsY
		prefix = "z" + prefix
	}
	name += isa
	TEXT(name, NOSPLIT, "func(acc *float64, x *"+elem+", n, rows, ldx int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets acc[i] += float64(x[r*ldx+i]) for r < rows in order, i < n (n a multiple of %d).", name, per))
	acc := Load(Param("acc"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	rows := Load(Param("rows"), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(Imm(uint64(size/2)), ldx) // bytes per row of x
	t := []reg.VecVirtual{vec(), vec()}
	for _, w := range widths {
		label := fmt.Sprintf("%s%d", prefix, w)
		sums := make([]reg.VecVirtual, w/per)
		for u := range sums {
			sums[u] = vec()
		}
		Label(label + "_cols")
		CMPQ(n, U32(w))
		JB(LabelRef(label + "_done"))
		for u, v := range sums {
			VMOVUPD(Mem{Base: acc, Disp: u * per * 8}, v)
		}
		p, r := GP64(), GP64()
		MOVQ(x, p)
		MOVQ(rows, r)
		TESTQ(r, r)
		JZ(LabelRef(label + "_store"))
		Label(label + "_row")
		for u, v := range sums {
			src := Mem{Base: p, Disp: u * per * size} // per values a sum
			tu := t[u%2]
			if bf16 {
				VPMOVZXWD(src, half(tu))
				VPSLLD(Imm(16), half(tu), half(tu))
				VCVTPS2PD(half(tu), tu)
			} else {
				VCVTPS2PD(src, tu)
			}
			VADDPD(tu, v, v)
		}
		ADDQ(ldx, p)
		DECQ(r)
		JNZ(LabelRef(label + "_row"))
		Label(label + "_store")
		for u, v := range sums {
			VMOVUPD(v, Mem{Base: acc, Disp: u * per * 8})
		}
		ADDQ(U32(w*8), acc)
		ADDQ(U32(w*size), x)
		SUBQ(U32(w), n)
		JMP(LabelRef(label + "_cols"))
		Label(label + "_done")
	}
	VZEROUPPER()
	RET()
}

// genAccumF64 generates accumF64AVX2: acc[i] += float64(x[i]) for i < n,
// n a multiple of 4. VCVTPS2PD widens 4 floats exactly; VADDPD rounds once.
func genAccumF64() {
	TEXT("accumF64AVX2", NOSPLIT, "func(acc *float64, x *float32, n int)")
	Pragma("noescape")
	Doc("accumF64AVX2 sets acc[i] += float64(x[i]) for i < n (n a multiple of 4).")
	acc := Load(Param("acc"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("n"), GP64())
	SHLQ(Imm(2), n)    // bytes of x
	const step = 4 * 4 // bytes of x per YMM of float64
	big := GP64()
	MOVQ(n, big)
	ANDQ(U32(^uint32(unroll*step-1)), big)
	i := GP64() // offset into x in bytes; acc's is 2*i
	XORQ(i, i)
	v := make([]reg.VecVirtual, unroll)
	for u := range v {
		v[u] = YMM()
	}
	TESTQ(big, big)
	JZ(LabelRef("accum_one"))
	Label("accum_loop")
	for u := range v {
		VCVTPS2PD(Mem{Base: x, Index: i, Scale: 1, Disp: u * step}, v[u])
	}
	for u := range v {
		VADDPD(Mem{Base: acc, Index: i, Scale: 2, Disp: 2 * u * step}, v[u], v[u])
	}
	for u := range v {
		VMOVUPD(v[u], Mem{Base: acc, Index: i, Scale: 2, Disp: 2 * u * step})
	}
	ADDQ(U32(unroll*step), i)
	CMPQ(i, big)
	JB(LabelRef("accum_loop"))
	Label("accum_one")
	CMPQ(i, n)
	JAE(LabelRef("accum_done"))
	VCVTPS2PD(Mem{Base: x, Index: i, Scale: 1}, v[0])
	VADDPD(Mem{Base: acc, Index: i, Scale: 2}, v[0], v[0])
	VMOVUPD(v[0], Mem{Base: acc, Index: i, Scale: 2})
	ADDQ(U32(step), i)
	JMP(LabelRef("accum_one"))
	Label("accum_done")
	VZEROUPPER()
	RET()
}

// adamwScalars are the scalar parameters of adamwAVX2, in AdamW's field
// order.
var adamwScalars = []string{"decay", "clip", "b1", "c1", "b2", "c2", "bc2Sqrt", "eps", "stepSize"}

// genAdamW generates adamwAVX2, one AdamW step over n elements (n a
// multiple of 8), one vector per trip: nine broadcast scalars and five
// temporaries fill the sixteen YMM registers. The operations are those of
// the Go fallback, in its order:
//
//	w = w*decay; gj = g*clip
//	m = b1*m + c1*gj; v = b2*v + (c2*gj)*gj
//	w = w - (stepSize*m) / (sqrt(v)/bc2Sqrt + eps)
func genAdamW() {
	TEXT("adamwAVX2", NOSPLIT, "func(w, grad, m, v *float32, n int, decay, clip, b1, c1, b2, c2, bc2Sqrt, eps, stepSize float32)")
	Pragma("noescape")
	Doc("adamwAVX2 applies one AdamW step to w, grad, m, v[:n] (n a multiple of 8); see AdamW.Update.")
	pw := Load(Param("w"), GP64())
	pg := Load(Param("grad"), GP64()) // not "g": the Go assembler reads g as a register
	pm := Load(Param("m"), GP64())
	pv := Load(Param("v"), GP64())
	n := Load(Param("n"), GP64())
	sc := map[string]reg.VecVirtual{}
	for _, name := range adamwScalars {
		p, err := Param(name).Resolve()
		if err != nil {
			panic(err)
		}
		sc[name] = YMM()
		VBROADCASTSS(p.Addr, sc[name])
	}
	SHLQ(Imm(2), n)
	i := GP64()
	XORQ(i, i)
	w, g, m, v, t := YMM(), YMM(), YMM(), YMM(), YMM()
	at := func(base reg.Register) Mem { return Mem{Base: base, Index: i, Scale: 1} }
	TESTQ(n, n)
	JZ(LabelRef("adamw_done"))
	Label("adamw_loop")
	VMOVUPS(at(pg), g)
	VMULPS(sc["clip"], g, g) // gj = g*clip
	VMOVUPS(at(pm), m)
	VMULPS(sc["b1"], m, m) // b1*m
	VMULPS(sc["c1"], g, t) // c1*gj
	VADDPS(t, m, m)        // m = b1*m + c1*gj
	VMOVUPS(m, at(pm))
	VMOVUPS(at(pv), v)
	VMULPS(sc["b2"], v, v) // b2*v
	VMULPS(sc["c2"], g, t) // c2*gj
	VMULPS(g, t, t)        // (c2*gj)*gj
	VADDPS(t, v, v)        // v = b2*v + (c2*gj)*gj
	VMOVUPS(v, at(pv))
	VSQRTPS(v, t)               // sqrt(v)
	VDIVPS(sc["bc2Sqrt"], t, t) // sqrt(v)/bc2Sqrt
	VADDPS(sc["eps"], t, t)     // denom
	VMULPS(sc["stepSize"], m, m)
	VDIVPS(t, m, m) // (stepSize*m)/denom
	VMOVUPS(at(pw), w)
	VMULPS(sc["decay"], w, w) // w*decay
	VSUBPS(m, w, w)           // w - (stepSize*m)/denom
	VMOVUPS(w, at(pw))
	ADDQ(U32(vecBytes), i)
	CMPQ(i, n)
	JB(LabelRef("adamw_loop"))
	Label("adamw_done")
	VZEROUPPER()
	RET()
}
