// Command dropout generates the kernels of package vec's DropoutMul with
// avo (github.com/mmcloughlin/avo): dst[i] = x[i]·m[i], the mask drawn
// from counters in the kernel, m[i] = 0 when
// mix64(key + i·golden)>>40 < thresh and keep otherwise (mix64 is
// SplitMix64's finaliser). `go generate` in internal/vec runs it:
//
//	go run -C asm/dropout . -out ../../dropout_amd64.s -stubs ../../dropout_amd64_stubs.go -pkg vec
//
// Each kernel hashes its lanes' counters as 64-bit integers, builds each
// lane's mask value (keep, or +0 where dropped) and multiplies x by it
// with VMULPS: the product the pure-Go loop makes, so the bits are its,
// signed zeros and NaNs included. Whole vectors only (n a multiple of 16,
// or of 8 for AVX2); the Go side runs the rest.
//
//   - dropoutAVX512 (AVX-512F and DQ: VPMULLQ): 16 elements a vector,
//     their counters in two ZMM of 8 lanes, the keep test a VPCMPUQ into
//     opmasks, the mask value a zero-masked move of keep.
//   - dropoutAVX2: 8 elements a vector, their counters in two YMM of 4
//     lanes, laid out so that VSHUFPS of the two lane masks gives the 8
//     elements in order; 64-bit products made of three VPMULUDQ.
package main

import (
	"flag"
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// SplitMix64's constants: the counter step and the finaliser's two
// multipliers (vec.Golden and vec.Mix64).
const (
	golden uint64 = 0x9e3779b97f4a7c15
	mul1   uint64 = 0xbf58476d1ce4e5b9
	mul2   uint64 = 0x94d049bb133111eb
)

// goldenTimes is golden·k mod 2^64.
func goldenTimes(k uint64) uint64 { return golden * k }

func main() {
	flag.Parse()
	ConstraintExpr("amd64,!purego")
	genAVX512()
	genAVX2()
	Generate()
}

// header opens kernel name (whole vectors of width elements, on the
// instruction set isa) and loads its parameters but keep.
func header(name string, width int, isa string) (dst, x, n, key, thresh reg.Register) {
	TEXT(name, NOSPLIT, "func(dst, x *float32, n int, key, thresh uint64, keep float32)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = x[i]·m[i] for i < n (n a multiple of %d), m[i] = 0 when", name, width),
		fmt.Sprintf("mix64(key+i·golden)>>40 < thresh, else keep (%s).", isa))
	dst = Load(Param("dst"), GP64())
	x = Load(Param("x"), GP64())
	n = Load(Param("n"), GP64())
	key = Load(Param("key"), GP64())
	thresh = Load(Param("thresh"), GP64())
	return
}

// broadcastKeep loads the parameter keep into every lane of v.
func broadcastKeep(v reg.VecVirtual) {
	p, err := Param("keep").Resolve()
	if err != nil {
		panic(err)
	}
	VBROADCASTSS(p.Addr, v)
}

// constQ broadcasts the 64-bit constant c into vector v.
func constQ(c uint64, v reg.VecVirtual) {
	r := GP64()
	MOVQ(U64(c), r)
	bcastQ(r, v)
}

// bcastQ broadcasts the general register r into v's 64-bit lanes: from r
// itself on a ZMM (AVX-512F), through v's low XMM on a YMM (AVX2 takes no
// general register).
func bcastQ(r reg.Register, v reg.VecVirtual) {
	if v.Size() == 64 {
		VPBROADCASTQ(r, v)
		return
	}
	MOVQ(r, v.AsX())
	VPBROADCASTQ(v.AsX(), v)
}

// lanes sets v's 64-bit lanes to key + golden·offs[l].
func lanes(key reg.Register, offs []uint64, v reg.VecVirtual, tmp reg.VecVirtual) {
	// the lanes' offsets from a constant vector in memory, then the key
	// added
	c := GLOBL(ConstName(offs), RODATA|NOPTR)
	for i, o := range offs {
		DATA(8*i, U64(goldenTimes(o)))
	}
	bcastQ(key, tmp)
	VPADDQ(c, tmp, v)
}

var constNames = map[string]bool{}

// ConstName is a unique name for the offsets table offs.
func ConstName(offs []uint64) string {
	name := "dropoutoffs"
	for _, o := range offs {
		name += string(rune('a' + o))
	}
	if constNames[name] {
		panic("dropout: table " + name + " twice")
	}
	constNames[name] = true
	return name
}

// xorShift emits z ^= z >> s.
func xorShift(z, t reg.VecVirtual, s uint64, xor func(...Op)) {
	VPSRLQ(Imm(s), z, t)
	xor(t, z, z)
}

// genAVX512 generates dropoutAVX512.
func genAVX512() {
	dst, x, n, key, th := header("dropoutAVX512", 16, "AVX-512F and DQ")
	SHLQ(Imm(40), th) // z>>40 < thresh ⟺ z < thresh<<40 (thresh < 1<<24)
	thv, m1, m2, step := ZMM(), ZMM(), ZMM(), ZMM()
	bcastQ(th, thv)
	constQ(mul1, m1)
	constQ(mul2, m2)
	constQ(goldenTimes(16), step)
	keep := ZMM()
	broadcastKeep(keep)
	lo, hi, t := ZMM(), ZMM(), ZMM()
	lanes(key, []uint64{0, 1, 2, 3, 4, 5, 6, 7}, lo, t)
	lanes(key, []uint64{8, 9, 10, 11, 12, 13, 14, 15}, hi, t)
	SHRQ(Imm(4), n)
	JZ(LabelRef("z_done"))
	Label("z_loop")
	klo, khi, k := K(), K(), K()
	for _, c := range []struct {
		ctr reg.VecVirtual
		ok  reg.OpmaskVirtual
	}{{lo, klo}, {hi, khi}} {
		z := ZMM()
		xorShift2(c.ctr, z, t, 30)
		VPMULLQ(m1, z, z)
		xorShift(z, t, 27, VPXORQ)
		VPMULLQ(m2, z, z)
		xorShift(z, t, 31, VPXORQ)
		VPCMPUQ(Imm(5), thv, z, c.ok) // z >= thresh<<40: kept
		VPADDQ(step, c.ctr, c.ctr)
	}
	KUNPCKBW(klo, khi, k) // elements 0..7 from lo, 8..15 from hi
	v := ZMM()
	VMOVAPS_Z(keep, k, v) // keep, or +0 where dropped
	VMULPS(Mem{Base: x}, v, v)
	VMOVUPS(v, Mem{Base: dst})
	ADDQ(U32(64), x)
	ADDQ(U32(64), dst)
	DECQ(n)
	JNZ(LabelRef("z_loop"))
	Label("z_done")
	VZEROUPPER()
	RET()
}

// vpxor is VPXOR (AVX2) as xorShift takes it.
func vpxor(ops ...Op) { VPXOR(ops[0], ops[1], ops[2]) }

// xorShift2 emits z = c ^ (c >> s), c kept.
func xorShift2(c, z, t reg.VecVirtual, s uint64) {
	VPSRLQ(Imm(s), c, t)
	if z.Size() == 64 {
		VPXORQ(t, c, z)
		return
	}
	VPXOR(t, c, z)
}

// mulQ emits z *= c (mod 2^64) on AVX2, c's low and high halves given as
// lanes cl and ch: lo(z)·cl + (hi(z)·cl + lo(z)·ch)<<32.
func mulQ(z, cl, ch, t1, t2 reg.VecVirtual) {
	VPSRLQ(Imm(32), z, t1)
	VPMULUDQ(cl, t1, t1) // hi(z)·cl
	VPMULUDQ(ch, z, t2)  // lo(z)·ch
	VPADDQ(t2, t1, t1)
	VPSLLQ(Imm(32), t1, t1)
	VPMULUDQ(cl, z, z) // lo(z)·cl
	VPADDQ(t1, z, z)
}

// genAVX2 generates dropoutAVX2.
func genAVX2() {
	dst, x, n, key, th := header("dropoutAVX2", 8, "AVX2")
	thv := YMM()
	bcastQ(th, thv)
	c1l, c1h, c2l, c2h, step := YMM(), YMM(), YMM(), YMM(), YMM()
	constQ(mul1&0xffffffff, c1l)
	constQ(mul1>>32, c1h)
	constQ(mul2&0xffffffff, c2l)
	constQ(mul2>>32, c2h)
	constQ(goldenTimes(8), step)
	keep := YMM()
	broadcastKeep(keep)
	// a's lanes are elements 0, 1, 4, 5 and b's 2, 3, 6, 7: VSHUFPS
	// takes dwords 0 and 2 of each 128-bit half of a, then of b, so the
	// two lane masks give the elements in order
	a, b, t1, t2 := YMM(), YMM(), YMM(), YMM()
	lanes(key, []uint64{0, 1, 4, 5}, a, t1)
	lanes(key, []uint64{2, 3, 6, 7}, b, t1)
	SHRQ(Imm(3), n)
	JZ(LabelRef("y_done"))
	Label("y_loop")
	drop := []reg.VecVirtual{YMM(), YMM()}
	for i, ctr := range []reg.VecVirtual{a, b} {
		z := YMM()
		xorShift2(ctr, z, t1, 30)
		mulQ(z, c1l, c1h, t1, t2)
		xorShift(z, t1, 27, vpxor)
		mulQ(z, c2l, c2h, t1, t2)
		xorShift(z, t1, 31, vpxor)
		VPSRLQ(Imm(40), z, z)
		VPCMPGTQ(z, thv, drop[i]) // thresh > z>>40: dropped (both below 2^63)
		VPADDQ(step, ctr, ctr)
	}
	m := YMM()
	VSHUFPS(Imm(0x88), drop[1], drop[0], m) // the 8 elements' masks in order
	VANDNPS(keep, m, m)                     // keep, or +0 where dropped
	VMULPS(Mem{Base: x}, m, m)
	VMOVUPS(m, Mem{Base: dst})
	ADDQ(U32(32), x)
	ADDQ(U32(32), dst)
	DECQ(n)
	JNZ(LabelRef("y_loop"))
	Label("y_done")
	VZEROUPPER()
	RET()
}
