package crc32c

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// The Go folding (the kernels' contract) against hash/crc32, for both
// register widths (the ZMM and YMM kernels' shapes, whether or not this
// CPU runs them), every length of whole blocks up to 4 KiB and several
// registers.
func TestFoldGoIsCRC32C(t *testing.T) {
	data := randomBytes(4096, 1)
	for _, w := range []int{4, 2} {
		k := constantsFor(w)
		for n := 64 * w; n <= len(data); n += 64 * w {
			for _, crc := range []uint32{0, 1, 0xFFFFFFFF, 0x9E3779B9} {
				p := data[:n]
				want := crc32.Update(crc, table, p)
				if got := finish(foldGo(^crc, p, w, k)); got != want {
					t.Fatalf("w=%d n=%d crc=%#x: folded %#08x, hash/crc32 %#08x", w, n, crc, got, want)
				}
			}
		}
	}
}

// A wrong constant is caught: the negative control of the test above.
func TestFoldGoWrongConstant(t *testing.T) {
	p := randomBytes(1024, 2)
	for i := range constantsFor(4) {
		k := constantsFor(4)
		k[i] ^= 1 << 40
		if i < 10 && finish(foldGo(^uint32(0), p, 4, k)) == crc32.Checksum(p, table) {
			t.Errorf("constant %d damaged, still the checksum", i)
		}
	}
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
