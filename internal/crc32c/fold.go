package crc32c

import (
	"encoding/binary"
	"math/bits"
)

// The folding, in Go: the contract of the assembly kernel, which must
// give bitwise the same remainder (tests run both), and the reference of
// the constants.
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

// constants is the kernel's table, in its layout: the 256-byte and 64-byte
// distances (one lane each, broadcast by the kernel) and, for the last
// four lanes, the distances to the last lane: 48, 32, 16 bytes and none.
type constants [12]uint64

var foldConstants = func() *constants {
	var k constants
	for i, b := range []int{256, 64, 48, 32, 16} {
		p := distance(b)
		k[2*i], k[2*i+1] = p.h, p.l
	}
	return &k // k[10], k[11] stay 0: the last lane is not moved
}()

type lane struct{ lo, hi uint64 }

func load(p []byte) lane {
	return lane{binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])}
}

func (a lane) xor(b lane) lane { return lane{a.lo ^ b.lo, a.hi ^ b.hi} }

// forward is VPCLMULQDQ $0x00 XOR VPCLMULQDQ $0x11 of the lane with the
// pair (lo·h, hi·l).
func (k pair) forward(a lane) lane {
	lo1, hi1 := clmul(a.lo, k.h)
	lo2, hi2 := clmul(a.hi, k.l)
	return lane{lo1 ^ lo2, hi1 ^ hi2}
}

// clmul is the carry-less product of a and b: lo, hi.
func clmul(a, b uint64) (lo, hi uint64) {
	for i := range 64 {
		if b&(1<<i) != 0 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return lo, hi
}

// foldGo folds p (a multiple of 256 bytes, at least 256) from the CRC
// register r to a 128-bit remainder, exactly as the kernel does: sixteen
// lanes (lane 4i+j is lane j of ZMM i), r XORed into the first, each lane
// moved 256 bytes forward and XORed with the next 256 bytes' same lane;
// then register i into i+1 (64 bytes), then the last register's lanes
// into its last (48, 32, 16 bytes).
func foldGo(r uint32, p []byte, k *constants) (lo, hi uint64) {
	var a [16]lane
	for t := range a {
		a[t] = load(p[16*t:])
	}
	a[0].lo ^= uint64(r)
	d256, d64 := pair{k[0], k[1]}, pair{k[2], k[3]}
	for off := 256; off < len(p); off += 256 {
		for t := range a {
			a[t] = d256.forward(a[t]).xor(load(p[off+16*t:]))
		}
	}
	for i := range 3 {
		for j := range 4 {
			a[4*(i+1)+j] = a[4*(i+1)+j].xor(d64.forward(a[4*i+j]))
		}
	}
	x := a[15]
	for j := range 4 {
		x = x.xor(pair{k[4+2*j], k[5+2*j]}.forward(a[12+j]))
	}
	return x.lo, x.hi
}
