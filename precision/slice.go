package precision

import (
	"fmt"
	"sync"
)

// The slice conversions convert len(src) values and panic if dst is
// shorter. Each runs the vector kernel this CPU has (see Kernels) over the
// leading whole groups and the scalar code over the rest; the results are
// bitwise those of the scalar functions.

// EncodeFP16 sets dst[i] = ToFP16(src[i]).
func EncodeFP16(dst []uint16, src []float32) {
	checkLen("EncodeFP16", len(dst), len(src))
	encode(active.encFP16, dst, src, false, ToFP16)
}

// EncodeFP16Sat sets dst[i] = ToFP16Sat(src[i]).
func EncodeFP16Sat(dst []uint16, src []float32) {
	checkLen("EncodeFP16Sat", len(dst), len(src))
	encode(active.encFP16, dst, src, true, ToFP16Sat)
}

// DecodeFP16 sets dst[i] = FromFP16(src[i]).
func DecodeFP16(dst []float32, src []uint16) {
	checkLen("DecodeFP16", len(dst), len(src))
	decode(active.decFP16, dst, src, FromFP16)
}

// EncodeBF16 sets dst[i] = ToBF16(src[i]).
func EncodeBF16(dst []uint16, src []float32) {
	checkLen("EncodeBF16", len(dst), len(src))
	encode(active.encBF16, dst, src, false, ToBF16)
}

// EncodeBF16Sat sets dst[i] = ToBF16Sat(src[i]).
func EncodeBF16Sat(dst []uint16, src []float32) {
	checkLen("EncodeBF16Sat", len(dst), len(src))
	encode(active.encBF16, dst, src, true, ToBF16Sat)
}

// DecodeBF16 sets dst[i] = FromBF16(src[i]).
func DecodeBF16(dst []float32, src []uint16) {
	checkLen("DecodeBF16", len(dst), len(src))
	decode(active.decBF16, dst, src, FromBF16)
}

// roundChunk is the values RoundBF16 narrows at a time (its scratch stays
// in L1).
const roundChunk = 1024

// roundScratch holds RoundBF16's scratch (on the stack it would escape:
// the kernels are called through function values).
var roundScratch = sync.Pool{New: func() any { return new([roundChunk]uint16) }}

// RoundBF16 rounds each x[i] in place to the float32 value of its bf16,
// FromBF16(ToBF16(x[i])): EncodeBF16 then DecodeBF16, a chunk at a time
// through scratch, so bitwise the two casts of a round trip.
func RoundBF16(x []float32) {
	tmp := roundScratch.Get().(*[roundChunk]uint16)
	defer roundScratch.Put(tmp)
	for lo := 0; lo < len(x); lo += roundChunk {
		c := x[lo:min(len(x), lo+roundChunk)]
		encode(active.encBF16, tmp[:len(c)], c, false, ToBF16)
		decode(active.decBF16, c, tmp[:len(c)], FromBF16)
	}
}

func checkLen(fn string, dst, src int) {
	if dst < src {
		panic(fmt.Sprintf("precision.%s: len(dst) = %d, want >= len(src) = %d", fn, dst, src))
	}
}
