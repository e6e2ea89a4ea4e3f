package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// The Go folding (the kernel's contract) against hash/crc32, for every
// length of whole blocks up to 4 KiB and from several registers.
func TestFoldGoIsCRC32C(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for n := foldBlock; n <= len(data); n += foldBlock {
		for _, crc := range []uint32{0, 1, 0xFFFFFFFF, rng.Uint32()} {
			p := data[:n]
			want := crc32.Update(crc, table, p)
			if got := finish(foldGo(^crc, p, foldConstants)); got != want {
				t.Fatalf("n=%d crc=%#x: folded %#08x, hash/crc32 %#08x", n, crc, got, want)
			}
		}
	}
}

// A wrong constant is caught: the negative control of the test above.
func TestFoldGoWrongConstant(t *testing.T) {
	p := make([]byte, 1024)
	p[100] = 1
	k := *foldConstants
	k[0] ^= 1 << 40
	if finish(foldGo(^uint32(0), p, &k)) == crc32.Checksum(p, table) {
		t.Fatal("a damaged 256-byte constant still gave the checksum")
	}
}
