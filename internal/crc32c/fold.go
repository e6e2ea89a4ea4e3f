package crc32c

import "math/bits"

// The folding constants; foldGo (emu_test.go) is the kernels' contract
// in Go, which each kernel must match bitwise.
//
// A 16-byte lane is read little-endian as lo, hi. CRC-32C is bit-
// reflected: the first bit of the data (bit 0 of byte 0) is the highest
// power of x, so lo holds the high 64 coefficients (H) and hi the low 64
// (L), and the lane is the polynomial H·x^64 + L. Moving it forward by D
// bits is multiplying by x^D; modulo P that is H·(x^(64+D) mod P) +
// L·(x^D mod P), two 64×32-bit carry-less products that fit a lane.

// poly is CRC-32C's polynomial without its x^32 term, bit j for x^j.
const poly = 0x1EDC6F41

// xPowMod is x^e mod P, bit j for x^j.
func xPowMod(e int) uint32 {
	v := uint32(1)
	for range e {
		carry := v&(1<<31) != 0
		v <<= 1
		if carry {
			v ^= poly
		}
	}
	return v
}

// pair is the two constants that move a lane forward by some distance:
// h multiplies the lane's lo (H), l its hi (L). Both are reflected to 64
// bits (x^j at bit 63-j). A carry-less product of two reflected 64-bit
// values is the reflected 128-bit product times x, so each constant is
// one power of x short: x^(D+63) and x^(D-1).
type pair struct{ h, l uint64 }

func distance(bytes int) pair {
	d := 8 * bytes
	return pair{h: bits.Reverse64(uint64(xPowMod(d + 63))), l: bits.Reverse64(uint64(xPowMod(d - 1)))}
}

// A kernel's shape: four registers of w lanes each (w = 4 for ZMM, 2 for
// YMM), so one round folds a block of 64w bytes.
//
// constants is a kernel's table, in its layout: the block's distance and
// a register's (16w bytes), one lane each, which the kernel broadcasts;
// then, for the last register's w lanes, each lane's distance to the last
// lane: 16(w-1), …, 16 bytes, and none (zeros: the last lane stays).
type constants []uint64

func constantsFor(w int) constants {
	k := make(constants, 4+2*w)
	dists := []int{64 * w, 16 * w}
	for j := range w - 1 {
		dists = append(dists, 16*(w-1-j))
	}
	for i, b := range dists {
		p := distance(b)
		k[2*i], k[2*i+1] = p.h, p.l
	}
	return k
}
