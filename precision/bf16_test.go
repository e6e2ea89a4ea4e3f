package precision

import (
	"math"
	"testing"
)

// bf16MaxFloat is the largest finite bfloat16, (2 - 2^-7)·2^127.
const bf16MaxFloat = (2 - 0x1p-7) * 0x1p127

// pow2 returns 2^k (|k| < 1023) as a float64, exactly.
func pow2(k int) float64 { return math.Float64frombits(uint64(k+1023) << 52) }

// refBF16 rounds x to bfloat16 by floating-point arithmetic in float64
// rather than by bit tricks: the spacing of bf16 values (8 significant
// bits, subnormal step 2^-133) at |x| is ulp = 2^(e-8) for |x| in
// [2^(e-1), 2^e), at least 2^-133; |x|/ulp is rounded with
// adding and taking away 2^52 in float64, and scaled back (all exact in float64), and results past
// the largest finite bf16 are infinite. NaNs follow the contract: quiet,
// same sign, the top bits of the payload kept.
func refBF16(x float32) uint16 {
	b := math.Float32bits(x)
	switch abs := b & 0x7FFFFFFF; {
	case abs > 0x7F800000: // NaN
		return uint16(b>>16) | 0x0040
	case abs == 0x7F800000 || abs == 0:
		return uint16(b >> 16)
	}
	a := math.Abs(float64(x))
	// |x| is in [2^(e-1), 2^e) with e = (biased exponent) - 126.
	ue := max(int(b>>23&0xFF)-126-8, -133)
	// a/ulp < 2^9: adding and taking away 2^52 rounds it to an integer,
	// ties to even, in float64 arithmetic.
	q := a*pow2(-ue) + 0x1p52 - 0x1p52
	r := q * pow2(ue)
	if r > bf16MaxFloat {
		r = math.Inf(1)
	}
	if b>>31 != 0 {
		r = -r
	}
	return uint16(math.Float32bits(float32(r)) >> 16) // float32(r) is exact
}

type bf16Ref struct{}

func (bf16Ref) ref(x float32) uint16 { return refBF16(x) }

// emuVCVTNEPS2BF16 is the Intel SDM's definition of VCVTNEPS2BF16 for one
// lane (vol. 2, "convert_fp32_to_bfloat16"): zero and denormal inputs give
// a zero of their sign, an infinity its top half, a NaN its top half with
// the quiet bit set, and a normal number x + 0x7FFF + lsb (integer add),
// top half. MXCSR is neither consulted nor updated.
func emuVCVTNEPS2BF16(x float32) uint16 {
	b := math.Float32bits(x)
	switch exp, frac := b>>23&0xFF, b&0x7FFFFF; {
	case exp == 0:
		return uint16(b>>16) & 0x8000
	case exp == 0xFF && frac == 0:
		return uint16(b >> 16)
	case exp == 0xFF:
		return uint16(b>>16) | 0x0040
	}
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// emuFixBF16 is the contract of the kernel encBF16AVX512BF16 for one
// lane, given its input x and VCVTNEPS2BF16's result h for it (for the
// clamped input when saturating): the result is replaced by the integer
// rounding where x is subnormal (exponent 0, fraction not 0).
func emuFixBF16(x float32, h uint16) uint16 {
	if b := math.Float32bits(x); b&0x7F800000 == 0 && b&0x7FFFFF != 0 {
		return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
	}
	return h
}

// emuClampBF16 is the kernel's saturating clamp: lanes with |x| in
// [0x7F7F8000, Inf) become sign | 0x7F7F7FFF, which rounds to the largest
// finite bf16.
func emuClampBF16(x float32) (float32, bool) {
	b := math.Float32bits(x)
	if abs := b & 0x7FFFFFFF; abs >= 0x7F7F8000 && abs < 0x7F800000 {
		return math.Float32frombits(b&0x80000000 | 0x7F7F7FFF), true
	}
	return x, false
}

// TestBF16Exhaustive checks ToBF16, ToBF16Sat, every bf16 kernel this
// machine runs and the emulated AVX512_BF16 kernel (emuVCVTNEPS2BF16 with
// the kernel's clamp and fix-up, so its contract is tested on any machine)
// against refBF16 for all 2^32 float32 inputs. Where the machine has
// AVX512_BF16 it also checks the bare VCVTNEPS2BF16 against
// emuVCVTNEPS2BF16, so the emulation is the instruction's real behaviour.
func TestBF16Exhaustive(t *testing.T) {
	ks := archKernels().encBF16
	bare := hasKernel(ks, "avx512bf16")
	r := newReport()
	forAllFloat32(t, newNarrowScratch, func(src []float32, s narrowScratch) {
		setWant(s, src, bf16Ref{}, bf16Inf, bf16Max)
		for i, x := range src {
			s.got[i] = ToBF16(x)
		}
		compare(r, "ToBF16", src, s.got, s.want)
		for i, x := range src {
			s.got[i] = ToBF16Sat(x)
		}
		compare(r, "ToBF16Sat", src, s.got, s.wantSat)
		for i, x := range src {
			s.emu[i] = emuVCVTNEPS2BF16(x)
			s.got[i] = emuFixBF16(x, s.emu[i])
		}
		compare(r, "emulated avx512bf16", src, s.got, s.want)
		// The clamp leaves every input outside its band alone, so there the
		// emulated saturating result is the plain one, still in s.got.
		for i, x := range src {
			if c, ok := emuClampBF16(x); ok {
				s.got[i] = emuFixBF16(x, emuVCVTNEPS2BF16(c))
			}
		}
		compare(r, "emulated avx512bf16 (saturating)", src, s.got, s.wantSat)
		if bare {
			bareVCVTNEPS2BF16(&s.got[0], &src[0], len(src))
			compare(r, "bare VCVTNEPS2BF16 against emuVCVTNEPS2BF16", src, s.got, s.emu)
		}
		checkKernels(r, ks, src, s)
	})
	r.fail(t)
	t.Logf("checked ToBF16, ToBF16Sat, the emulated avx512bf16 kernel, the bare instruction (%v) and the kernels %v",
		bare, encKernelNames(ks))
}
