//go:build amd64 && !purego

package pgemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg pgemm

// hasAVX512 reports whether the AVX-512 kernels run here. x/sys/cpu
// reports AVX-512 only when the OS saves the ZMM registers.
var hasAVX512 = cpu.X86.HasAVX512F

// asmKernels are the kernels by rows (index m-1): one panel, and several
// (as panelsFor says) for up to four rows; and Rows' kernels.
var asmKernels = kernelSet{
	one: [maxRows]kernelFunc{pgemmAVX512m1p1, pgemmAVX512m2p1, pgemmAVX512m3p1, pgemmAVX512m4p1,
		pgemmAVX512m5p1, pgemmAVX512m6p1, pgemmAVX512m7p1, pgemmAVX512m8p1},
	wide: [maxRows]kernelFunc{pgemmAVX512m1p4, pgemmAVX512m2p4, pgemmAVX512m3p2, pgemmAVX512m4p2},
	rows: [maxRows][nr / lanes][2]kernelFunc{
		{{rowsAVX512m1v1, rowsAVX512m1v1acc}, {rowsAVX512m1v2, rowsAVX512m1v2acc}},
		{{rowsAVX512m2v1, rowsAVX512m2v1acc}, {rowsAVX512m2v2, rowsAVX512m2v2acc}},
		{{rowsAVX512m3v1, rowsAVX512m3v1acc}, {rowsAVX512m3v2, rowsAVX512m3v2acc}},
		{{rowsAVX512m4v1, rowsAVX512m4v1acc}, {rowsAVX512m4v2, rowsAVX512m4v2acc}},
		{{rowsAVX512m5v1, rowsAVX512m5v1acc}, {rowsAVX512m5v2, rowsAVX512m5v2acc}},
		{{rowsAVX512m6v1, rowsAVX512m6v1acc}, {rowsAVX512m6v2, rowsAVX512m6v2acc}},
		{{rowsAVX512m7v1, rowsAVX512m7v1acc}, {rowsAVX512m7v2, rowsAVX512m7v2acc}},
		{{rowsAVX512m8v1, rowsAVX512m8v1acc}, {rowsAVX512m8v2, rowsAVX512m8v2acc}},
	},
}

func archKernels() (*kernelSet, string) {
	if hasAVX512 {
		return &asmKernels, "avx512"
	}
	return nil, ""
}
