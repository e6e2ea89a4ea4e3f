//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../fold_amd64.s -stubs ../fold_amd64_stubs.go -pkg crc32c

var (
	zmmConstants = constantsFor(4)
	ymmConstants = constantsFor(2)
)

// archKernels lists the folding kernels this CPU and OS run, best first.
// x/sys/cpu reports AVX2 and AVX-512 only when the OS saves their
// registers, but VPCLMULQDQ only with AVX-512, while CPUs without it have
// the YMM form too (Zen 3, Alder Lake): CPUID says so (leaf 7, ECX bit 10).
func archKernels() []*kernel {
	x := cpu.X86
	vpclmul := cpuid7ECX()&(1<<10) != 0
	var ks []*kernel
	if x.HasAVX512F && vpclmul {
		ks = append(ks, &kernel{"avx512-vpclmulqdq", 4, func(r uint32, p []byte) (uint64, uint64) {
			return foldAVX512(r, &p[0], len(p), &zmmConstants[0])
		}})
	}
	if x.HasAVX2 && vpclmul {
		ks = append(ks, &kernel{"avx2-vpclmulqdq", 2, func(r uint32, p []byte) (uint64, uint64) {
			return foldAVX2(r, &p[0], len(p), &ymmConstants[0])
		}})
	}
	return ks
}
