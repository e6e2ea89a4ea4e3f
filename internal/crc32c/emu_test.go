package crc32c

import (
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
