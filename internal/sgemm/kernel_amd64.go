//go:build amd64 && !purego

package sgemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg sgemm

// avx2PackBRows is the AVX2 family's packBRows. On a Zen 3 (the baby
// step's shapes, modes alternated 60 rounds in one process) packing B took
// A·B and Aᵀ·B of 128 to 768 rows to 0.90-0.95 of their times on one core
// (one at 0.995) and 0.91-0.98 on two; an earlier run put 64 and 65 rows
// at 1.05-1.08: there too few row panels reuse a packed panel to pay for
// its copy. The AVX-512 family reads a panel of 32 columns, two cache
// lines a depth step, which L1 does not hold either way: it reads B in
// place at any size (when in place reading came in, on an AVX-512 EPYC,
// it took Aᵀ·B from 1.06 to 0.92 of the forward's A·Bᵀ time in the step's
// profile, A·B from 0.90 to 0.85).
const avx2PackBRows = 96

// archKernels returns the assembly kernels this CPU and OS support, best
// first. x/sys/cpu reports AVX2 and AVX-512 only when the OS saves the
// wider registers.
func archKernels() []*kernel {
	const fmaChains = 12 // the accumulators of fmaPeak512 and fmaPeak256 (asm: fmaChains)
	var ks []*kernel
	if cpu.X86.HasAVX512F {
		ks = append(ks, &kernel{name: "avx512", mr: 12, nr: 32, mc: 144, kc: 256, nc: 2048,
			packed: kernelAVX512x32P, rows: kernelAVX512x32R, cols: kernelAVX512x32C,
			packedHalf: kernelAVX512x16P, rowsHalf: kernelAVX512x16R, colsHalf: kernelAVX512x16C,
			packedS: kernelAVX512x32PS, rowsS: kernelAVX512x32RS, colsS: kernelAVX512x32CS, transpose8: transpose8, copyRows: copyRows,
			fmaLoop: fmaPeak512, fmaFlops: 2 * fmaChains * 16})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, &kernel{name: "avx2", mr: 6, nr: 16, mc: 144, kc: 256, nc: 2048,
			packed: kernelAVX2x16P, rows: kernelAVX2x16R, cols: kernelAVX2x16C,
			packedHalf: kernelAVX2x8P, rowsHalf: kernelAVX2x8R, colsHalf: kernelAVX2x8C,
			packedS: kernelAVX2x16PS, rowsS: kernelAVX2x16RS, colsS: kernelAVX2x16CS, transpose8: transpose8, copyRows: copyRows,
			packBRows: avx2PackBRows, fmaLoop: fmaPeak256, fmaFlops: 2 * fmaChains * 8})
	}
	return ks
}
