//go:build amd64 && !purego

package pgemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg pgemm

// hasAVX512 reports whether the AVX-512 kernels run here, hasAVX2 the
// AVX2 ones. x/sys/cpu reports AVX-512 only when the OS saves the ZMM
// registers, and AVX2 and FMA only when it saves the YMM registers.
var (
	hasAVX512 = cpu.X86.HasAVX512F
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// avx512Kernels are the AVX-512 kernels by rows (index m-1): one panel,
// and four panels for one or two rows, two for three or four; and Rows'
// kernels.
var avx512Kernels = kernelSet{
	one: [maxRows]kernelFunc{pgemmAVX512m1p1, pgemmAVX512m2p1, pgemmAVX512m3p1, pgemmAVX512m4p1,
		pgemmAVX512m5p1, pgemmAVX512m6p1, pgemmAVX512m7p1, pgemmAVX512m8p1},
	wide: [maxRows]wideKernel{{4, pgemmAVX512m1p4}, {4, pgemmAVX512m2p4}, {2, pgemmAVX512m3p2}, {2, pgemmAVX512m4p2}},
	rows: [maxRows][nr / half][2]kernelFunc{
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

// avx2Kernels are the AVX2+FMA kernels. With 16 YMM registers and four
// vectors to a row of a panel, the assembly has kernels of up to three
// rows of one panel, of one row of three panels, and Rows' kernels
// of up to seven rows of 16 columns or three of 32; more rows run as
// groups of those (groupRows).
var avx2Kernels = func() *kernelSet {
	one := []kernelFunc{pgemmAVX2m1p1, pgemmAVX2m2p1, pgemmAVX2m3p1}
	rows := [nr / half][2][]kernelFunc{
		{
			{rowsAVX2m1v2, rowsAVX2m2v2, rowsAVX2m3v2, rowsAVX2m4v2, rowsAVX2m5v2, rowsAVX2m6v2, rowsAVX2m7v2},
			{rowsAVX2m1v2acc, rowsAVX2m2v2acc, rowsAVX2m3v2acc, rowsAVX2m4v2acc, rowsAVX2m5v2acc, rowsAVX2m6v2acc, rowsAVX2m7v2acc},
		},
		{
			{rowsAVX2m1v4, rowsAVX2m2v4, rowsAVX2m3v4},
			{rowsAVX2m1v4acc, rowsAVX2m2v4acc, rowsAVX2m3v4acc},
		},
	}
	ks := &kernelSet{}
	ks.wide[0] = wideKernel{3, pgemmAVX2m1p3}
	for m := 1; m <= maxRows; m++ {
		ks.one[m-1] = groupRows(one, m, false)
		for v := range rows {
			for acc := range rows[v] {
				ks.rows[m-1][v][acc] = groupRows(rows[v][acc], m, true)
			}
		}
	}
	return ks
}()

// asmSets are the sets of kernels that run on this machine, the fastest
// first.
func asmSets() []namedSet {
	var s []namedSet
	if hasAVX512 {
		s = append(s, namedSet{"avx512", &avx512Kernels})
	}
	if hasAVX2 {
		s = append(s, namedSet{"avx2", avx2Kernels})
	}
	return s
}
