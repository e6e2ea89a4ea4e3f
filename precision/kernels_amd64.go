//go:build amd64 && !purego

package precision

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernels_amd64.s -stubs ../kernels_amd64_stubs.go -pkg precision

// archKernels lists the kernels this CPU and OS support, best first.
// x/sys/cpu reports AVX2 and AVX-512 only when the OS saves their
// registers; F16C's VEX instructions need the OS's AVX support too.
func archKernels() kernelLists {
	var l kernelLists
	x := cpu.X86
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL
	if avx512 && x.HasAVX512BF16 {
		l.encBF16 = append(l.encBF16, encKernel{"avx512bf16", 16, encBF16AVX512BF16})
	}
	if avx512 {
		l.encFP16 = append(l.encFP16, encKernel{"avx512", 16, encFP16AVX512})
		l.decFP16 = append(l.decFP16, decKernel{"avx512", 16, decFP16AVX512})
		l.encBF16 = append(l.encBF16, encKernel{"avx512", 16, encBF16AVX512})
		l.decBF16 = append(l.decBF16, decKernel{"avx512", 16, decBF16AVX512})
		l.abs = append(l.abs, absKernel{"avx512", 16, maxAbsAVX512, unscaleAVX512})
	}
	if x.HasAVX && x.HasF16C {
		l.encFP16 = append(l.encFP16, encKernel{"f16c", 8, encFP16F16C})
		l.decFP16 = append(l.decFP16, decKernel{"f16c", 8, decFP16F16C})
	}
	if x.HasAVX2 {
		l.encBF16 = append(l.encBF16, encKernel{"avx2", 16, encBF16AVX2})
		l.decBF16 = append(l.decBF16, decKernel{"avx2", 8, decBF16AVX2})
		l.abs = append(l.abs, absKernel{"avx2", 8, maxAbsAVX2, unscaleAVX2})
	}
	return l
}
