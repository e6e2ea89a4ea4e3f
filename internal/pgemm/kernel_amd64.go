//go:build amd64 && !purego

package pgemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg pgemm

// hasAVX512 reports whether the AVX-512 kernels run here. x/sys/cpu
// reports AVX-512 only when the OS saves the ZMM registers.
var hasAVX512 = cpu.X86.HasAVX512F

// asmKernels are the kernels by rows (index m-1): one panel, and several
// (as panelsFor says) for up to four rows.
var asmKernels = kernelSet{
	one: [maxRows]kernelFunc{pgemmAVX512m1p1, pgemmAVX512m2p1, pgemmAVX512m3p1, pgemmAVX512m4p1,
		pgemmAVX512m5p1, pgemmAVX512m6p1, pgemmAVX512m7p1, pgemmAVX512m8p1},
	wide: [maxRows]kernelFunc{pgemmAVX512m1p4, pgemmAVX512m2p4, pgemmAVX512m3p2, pgemmAVX512m4p2},
}

func archKernels() (*kernelSet, string) {
	if hasAVX512 {
		return &asmKernels, "avx512"
	}
	return nil, ""
}
