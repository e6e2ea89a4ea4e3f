package vec

import "unsafe"

// Dropout masks drawn where they are applied: DropoutMul multiplies by an
// inverted-dropout mask whose every element is decided by a hash of its
// counter, so the mask is never written to memory and any piece of it can
// be drawn again, by anyone, from the counter of its first element.

// Golden is the counters' step: element i of a DropoutMul from key is
// decided by Mix64(key + i·Golden).
const Golden = 0x9e3779b97f4a7c15

// Mix64 is SplitMix64's finaliser, a bijection of uint64 with full
// avalanche.
func Mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// DropoutMul sets dst[i] = x[i]·m[i] for i < len(x), m the mask drawn from
// key: m[i] = 0 when Mix64(key+i·Golden)>>40 < thresh (a fraction
// thresh/2^24 of the elements, thresh at most 2^24) and keep otherwise.
// The product is x[i]·m[i] rounded once, as a multiply by a mask in
// memory makes it (signed zeros and NaNs included). dst may be x.
func DropoutMul(dst, x []float32, key uint64, thresh uint32, keep float32) {
	dst = dst[:len(x)]
	n := 0
	if k := dropoutBest; k.kernel != nil && len(x) >= k.width {
		n = len(x) / k.width * k.width
		k.kernel(unsafe.SliceData(dst), unsafe.SliceData(x), n, key, uint64(thresh), keep)
	}
	dropoutGo(dst[n:], x[n:], key+uint64(n)*Golden, thresh, keep)
}

// dropoutGo is DropoutMul's pure-Go loop.
func dropoutGo(dst, x []float32, key uint64, thresh uint32, keep float32) {
	dst = dst[:len(x)]
	for i, v := range x {
		m := keep
		if Mix64(key)>>40 < uint64(thresh) {
			m = 0
		}
		dst[i] = v * m
		key += Golden
	}
}

// dropoutImpl is a kernel of DropoutMul on whole vectors of width
// elements (nil: the Go loop alone).
type dropoutImpl struct {
	name   string
	width  int
	kernel func(dst, x *float32, n int, key, thresh uint64, keep float32)
}

// dropoutBest is the first of dropoutImpls: what DropoutMul runs.
var dropoutBest = dropoutImpls()[0]
