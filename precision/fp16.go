package precision

import "math"

// fp16 bit patterns.
const (
	fp16Inf  = 0x7C00 // +Inf
	fp16Max  = 0x7BFF // 65504, the largest finite value
	fp16QNaN = 0x7E00 // exponent all ones and the quiet bit
	// f32Overflow16 is the float32 bit pattern of 65520, halfway between
	// 65504 and 65536: it and everything above round to Inf (the tie goes
	// to the even neighbour, 65536).
	f32Overflow16  = 0x477FF000
	f32MinNormal16 = 0x38800000 // 2^-14, the smallest normal fp16
)

// ToFP16 rounds x to IEEE binary16 (round to nearest, ties to even) and
// returns its bits. Values that round past 65504 become ±Inf; subnormal
// results (down to 2^-24) are kept; a NaN becomes a quiet NaN of the same
// sign keeping the top 9 bits of its payload; signed zeros are kept.
func ToFP16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7FFFFFFF
	switch {
	case abs > 0x7F800000: // NaN
		return sign | fp16QNaN | uint16(abs>>13)&0x3FF
	case abs >= f32Overflow16: // Inf, or rounds to it
		return sign | fp16Inf
	case abs < f32MinNormal16:
		// The float32 ulp of 0.5 is 2^-24, fp16's subnormal step: adding
		// 0.5 rounds |x| to a multiple of it, to nearest even, and leaves
		// the multiple in the low bits (it may be 0x400, the smallest
		// normal fp16: the right bits).
		f := math.Float32frombits(abs) + 0.5
		return sign | uint16(math.Float32bits(f)-math.Float32bits(0.5))
	}
	// Rebias the exponent (127 → 15) and round away the 13 dropped bits:
	// add just under half their weight, plus one when the kept part is
	// odd. A carry out of the fraction steps the exponent, as it should.
	abs += 0xFFF + (abs>>13)&1 - (127-15)<<23
	return sign | uint16(abs>>13)
}

// ToFP16Sat is ToFP16 saturating: a finite x that would round past the
// largest finite fp16 becomes ±65504. Infinities stay infinite and NaNs
// stay NaN.
func ToFP16Sat(x float32) uint16 {
	h := ToFP16(x)
	if h&0x7FFF == fp16Inf && math.Float32bits(x)&0x7FFFFFFF != 0x7F800000 {
		return h&0x8000 | fp16Max
	}
	return h
}

// FromFP16 returns the binary16 value with bits h as a float32 (exactly;
// a NaN comes back as a quiet NaN of the same sign and payload).
func FromFP16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	m := uint32(h & 0x3FF)
	switch {
	case e == 0x1F && m != 0:
		return math.Float32frombits(sign | 0x7FC00000 | m<<13)
	case e == 0x1F:
		return math.Float32frombits(sign | 0x7F800000)
	case e != 0:
		return math.Float32frombits(sign | (e+127-15)<<23 | m<<13)
	case m == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: m·2^-24 with m < 2^10, normal in float32.
	v := float32(m) * 0x1p-24 // exact
	if sign != 0 {
		v = -v
	}
	return v
}
