package precision

import "math"

// bf16 bit patterns.
const (
	bf16Inf   = 0x7F80 // +Inf
	bf16Max   = 0x7F7F // (2 - 2^-7)·2^127, the largest finite value
	bf16Quiet = 0x0040 // the quiet bit of a NaN
)

// ToBF16 rounds x to bfloat16 (round to nearest, ties to even) and returns
// its bits. Values that round past the largest finite bf16 become ±Inf;
// subnormals are kept (not flushed); a NaN becomes a quiet NaN of the same
// sign keeping the top 6 bits of its payload; signed zeros are kept.
func ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16) | bf16Quiet
	}
	// Add just under half of the dropped 16 bits' weight, plus one when
	// the kept part is odd: a tie then carries exactly when the kept part
	// is odd. A carry out of the fraction steps the exponent (up to Inf).
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

// ToBF16Sat is ToBF16 saturating: a finite x that would round past the
// largest finite bf16 becomes ±bf16's largest finite value. Infinities
// stay infinite and NaNs stay NaN.
func ToBF16Sat(x float32) uint16 {
	h := ToBF16(x)
	if h&0x7FFF == bf16Inf && math.Float32bits(x)&0x7FFFFFFF != 0x7F800000 {
		return h&0x8000 | bf16Max
	}
	return h
}

// FromBF16 returns the bfloat16 value with bits h as a float32 (exactly:
// bf16 is float32's top half; a NaN comes back quiet, of the same sign
// and payload).
func FromBF16(h uint16) float32 {
	if h&0x7FFF > bf16Inf {
		h |= bf16Quiet
	}
	return math.Float32frombits(uint32(h) << 16)
}
