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

// foldGo folds p (a multiple of the block, 64w bytes, at least one) from
// the CRC register r to a 128-bit remainder, exactly as the kernel of w
// lanes a register does: 4w lanes (lane w·i+j is lane j of register i),
// r XORed into the first, each lane moved a block forward and XORed with
// the next block's same lane; then register i into i+1 (16w bytes on),
// then the last register's lanes into its last.
func foldGo(r uint32, p []byte, w int, k constants) (lo, hi uint64) {
	block := 64 * w
	a := make([]lane, 4*w)
	for t := range a {
		a[t] = load(p[16*t:])
	}
	a[0].lo ^= uint64(r)
	dBlock, dReg := pair{k[0], k[1]}, pair{k[2], k[3]}
	for off := block; off < len(p); off += block {
		for t := range a {
			a[t] = dBlock.forward(a[t]).xor(load(p[off+16*t:]))
		}
	}
	for i := range 3 {
		for j := range w {
			a[w*(i+1)+j] = a[w*(i+1)+j].xor(dReg.forward(a[w*i+j]))
		}
	}
	last := a[3*w:]
	x := last[w-1]
	for j := range w {
		x = x.xor(pair{k[4+2*j], k[5+2*j]}.forward(last[j]))
	}
	return x.lo, x.hi
}
