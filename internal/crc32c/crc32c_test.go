package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// Update equals hash/crc32 on every path (kernel or not), for lengths
// around the thresholds, at every alignment, continued from any value.
func TestUpdateIsCRC32C(t *testing.T) {
	data := randomBytes(70000, 4)
	for _, fold := range []bool{false, true} {
		if fold && !hasFold {
			continue
		}
		useFold = fold
		for _, n := range []int{0, 1, 15, 255, 256, 1023, 1024, 1025, 1279, 1280, 4095, 65536, 69000} {
			for off := range 4 {
				for _, crc := range []uint32{0, 0xFFFFFFFF, 0xDEADBEEF} {
					p := data[off : off+n]
					if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
						t.Fatalf("fold=%v n=%d off=%d crc=%#x: %#08x, hash/crc32 %#08x", fold, n, off, crc, got, want)
					}
				}
			}
		}
	}
	useFold = hasFold
}

// A checksum continued piece by piece equals the whole one, whatever the
// pieces (the TCP engine sums a frame as the socket takes it).
func TestUpdateInPieces(t *testing.T) {
	data := randomBytes(1<<20, 5)
	rng := rand.New(rand.NewPCG(9, 9))
	want := crc32.Checksum(data, table)
	sum := uint32(0)
	for p := data; len(p) > 0; {
		k := min(len(p), 1+rng.IntN(40000))
		sum = Update(sum, p[:k])
		p = p[k:]
	}
	if sum != want {
		t.Fatalf("in pieces %#08x, whole %#08x", sum, want)
	}
}

// Negative control: a flipped bit changes the checksum.
func TestBitFlipDetected(t *testing.T) {
	p := randomBytes(1<<16, 6)
	before := Checksum(p)
	p[12345] ^= 0x10
	if Checksum(p) == before {
		t.Fatal("a flipped bit kept the checksum")
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		p := randomBytes(n, 8)
		b.Run(byteSize(n)+"/"+Kernel(), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				Update(0, p)
			}
		})
		b.Run(byteSize(n)+"/hash-crc32", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Update(0, table, p)
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
