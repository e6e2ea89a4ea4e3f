package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// Each kernel this CPU runs gives foldGo's remainder bitwise: its
// contract (foldGo itself is checked against hash/crc32 for every width).
func TestKernelsAreFoldGo(t *testing.T) {
	if len(kernels) == 0 {
		t.Skip("no folding kernel runs here (no VPCLMULQDQ, or a purego build): foldGo stands for them, tested against hash/crc32")
	}
	data := randomBytes(64<<10+3, 3)
	for _, k := range kernels {
		consts := constantsFor(k.lanes)
		for _, n := range []int{256, 512, 768, 1024, 4096, 64 << 10} {
			for _, off := range []int{0, 1, 3} { // unaligned too
				p := data[off : off+n]
				for _, r := range []uint32{0, 0xFFFFFFFF, 0x12345678} {
					lo, hi := k.fold(r, p)
					wlo, whi := foldGo(r, p, k.lanes, consts)
					if lo != wlo || hi != whi {
						t.Fatalf("%s n=%d off=%d r=%#x: kernel %#x %#x, foldGo %#x %#x", k.name, n, off, r, lo, hi, wlo, whi)
					}
				}
			}
		}
	}
}

// paths is every way Update may run here: hash/crc32 alone (nil) and each
// kernel.
func paths() []*kernel { return append([]*kernel{nil}, kernels...) }

// Update equals hash/crc32 on every path, for lengths around the
// thresholds, at every alignment, continued from any value.
func TestUpdateIsCRC32C(t *testing.T) {
	defer active.Store(first(kernels))
	data := randomBytes(70000, 4)
	for _, k := range paths() {
		active.Store(k)
		for _, n := range []int{0, 1, 15, 127, 255, 256, 1023, 1024, 1025, 1151, 1279, 1280, 4095, 65536, 69000} {
			for off := range 4 {
				for _, crc := range []uint32{0, 0xFFFFFFFF, 0xDEADBEEF} {
					p := data[off : off+n]
					if got, want := Update(crc, p), crc32.Update(crc, table, p); got != want {
						t.Fatalf("%s n=%d off=%d crc=%#x: %#08x, hash/crc32 %#08x", Kernel(), n, off, crc, got, want)
					}
				}
			}
		}
	}
}

// SetKernel takes every name Kernels lists and refuses others.
func TestSetKernel(t *testing.T) {
	defer active.Store(first(kernels))
	for _, name := range Kernels() {
		if err := SetKernel(name); err != nil || Kernel() != name {
			t.Errorf("SetKernel(%q): %v, now %s", name, err, Kernel())
		}
	}
	if err := SetKernel("sse9"); err == nil {
		t.Error("SetKernel(sse9) succeeded")
	}
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
	before := Update(0, p)
	p[12345] ^= 0x10
	if Update(0, p) == before {
		t.Fatal("a flipped bit kept the checksum")
	}
}

// BenchmarkUpdate runs every path this CPU has on 4 KiB, 64 KiB, 1 MiB.
func BenchmarkUpdate(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	defer active.Store(first(kernels))
	for _, n := range []int{4 << 10, 64 << 10, 1 << 20} {
		p := randomBytes(n, 8)
		for _, k := range paths() {
			active.Store(k)
			b.Run(byteSize(n)+"/"+strings.ReplaceAll(Kernel(), "/", "-"), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					Update(0, p)
				}
			})
		}
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}
