//go:build amd64 && !purego

package crc32c

import "testing"

// The kernel gives foldGo's remainder bitwise: its contract.
func TestKernelIsFoldGo(t *testing.T) {
	if !hasFold {
		t.Skip("this CPU has no AVX-512 VPCLMULQDQ (or the build is purego): the kernel cannot run; foldGo is tested against hash/crc32")
	}
	data := randomBytes(64<<10+3, 3)
	for _, n := range []int{256, 512, 768, 1024, 4096, 64 << 10} {
		for _, off := range []int{0, 1, 3} { // unaligned too
			p := data[off : off+n]
			for _, r := range []uint32{0, 0xFFFFFFFF, 0x12345678} {
				lo, hi := foldAVX512(r, &p[0], n, (*[12]uint64)(foldConstants))
				wlo, whi := foldGo(r, p, foldConstants)
				if lo != wlo || hi != whi {
					t.Fatalf("n=%d off=%d r=%#x: kernel %#x %#x, foldGo %#x %#x", n, off, r, lo, hi, wlo, whi)
				}
			}
		}
	}
}
