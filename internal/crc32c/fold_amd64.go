//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../fold_amd64.s -stubs ../fold_amd64_stubs.go -pkg crc32c

// hasFold reports whether this CPU and OS run the folding kernel: ZMM
// registers (x/sys/cpu reports AVX-512 only when the OS saves them) and
// the vector carry-less multiply.
var hasFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ

// useFold selects the kernel; tests clear it to run the fallback.
var useFold = hasFold

func foldKernel(r uint32, p []byte) (lo, hi uint64) {
	return foldAVX512(r, &p[0], len(p), (*[12]uint64)(foldConstants))
}
