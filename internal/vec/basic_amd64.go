//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/basic . -out ../../basic_amd64.s -stubs ../../basic_amd64_stubs.go -pkg vec

// basicAVX2 reports whether the basic ops run their AVX2 kernels. x/sys/cpu
// reports AVX2 only when the OS saves the YMM registers. (The kernels use
// AVX instructions only; AVX2 is the baseline the package's kernels share.)
// Tests clear it to run the public API on the fallbacks.
var basicAVX2 = cpu.X86.HasAVX2

// accumZ reports whether, with basicAVX2, the column sums (AccumRowsF64,
// AccumRowsBF16F64) run their AVX-512 kernels: the AVX2 kernels' bits,
// with 16 ZMM of sums down the rows against 8 YMM. x/sys/cpu reports
// AVX-512F only when the OS saves the ZMM registers. Tests clear it to
// run the AVX2 kernels.
var accumZ = cpu.X86.HasAVX512F

// basicSplit is the number of leading elements of an n-element op the
// kernel handles (a multiple of group, or 0 without the kernels); the
// fallback does the rest.
func basicSplit(n, group int) int {
	if !basicAVX2 {
		return 0
	}
	return n - n%group
}

// add runs addAVX2 over the whole vectors and addGo over the rest.
func add(dst, a, b []float32) {
	n := basicSplit(len(dst), 8)
	if n > 0 {
		addAVX2(&dst[0], &a[0], &b[0], n)
	}
	addGo(dst[n:], a[n:], b[n:])
}

// mul runs mulAVX2 over the whole vectors and mulGo over the rest.
func mul(dst, a, b []float32) {
	n := basicSplit(len(dst), 8)
	if n > 0 {
		mulAVX2(&dst[0], &a[0], &b[0], n)
	}
	mulGo(dst[n:], a[n:], b[n:])
}

// addRow runs addRowAVX2 over the whole vectors of every row and addGo
// over each row's remaining columns.
func addRow(dst, x, b []float32) {
	cols := len(b)
	if !basicAVX2 || cols < 8 {
		addRowGo(dst, x, b)
		return
	}
	n := cols &^ 7
	addRowAVX2(&dst[0], &x[0], &b[0], len(dst)/cols, n, cols)
	if n == cols {
		return
	}
	for r := 0; r < len(dst); r += cols {
		addGo(dst[r+n:r+cols], x[r+n:r+cols], b[n:])
	}
}

// accumF64 runs accumF64AVX2 over groups of 4 and accumF64Go over the rest.
func accumF64(acc []float64, x []float32) {
	n := basicSplit(len(acc), 4)
	if n > 0 {
		accumF64AVX2(&acc[0], &x[0], n)
	}
	accumF64Go(acc[n:], x[n:])
}

// accumRowsF64 runs accumRowsF64AVX512 over groups of 8 columns (with
// accumZ), accumRowsF64AVX2 over groups of 4 of the rest and
// accumRowsF64Go over what remains.
func accumRowsF64(acc []float64, x []float32, rows, ldx int) {
	z, n := accumSplit(len(acc))
	if z > 0 {
		accumRowsF64AVX512(&acc[0], &x[0], z, rows, ldx)
	}
	if n > z {
		accumRowsF64AVX2(&acc[z], &x[z], n-z, rows, ldx)
	}
	if n < len(acc) {
		accumRowsF64Go(acc[n:], x[n:], rows, ldx)
	}
}

// accumRowsBF16F64 is accumRowsF64 on bf16 bits, kernel for kernel.
func accumRowsBF16F64(acc []float64, x []uint16, rows, ldx int) {
	z, n := accumSplit(len(acc))
	if z > 0 {
		accumRowsBF16F64AVX512(&acc[0], &x[0], z, rows, ldx)
	}
	if n > z {
		accumRowsBF16F64AVX2(&acc[z], &x[z], n-z, rows, ldx)
	}
	if n < len(acc) {
		accumRowsBF16F64Go(acc[n:], x[n:], rows, ldx)
	}
}

// accumSplit returns the leading columns of an n-column sum the AVX-512
// kernel takes (z, a multiple of 8) and, after them, those the AVX2
// kernel takes up to n (a multiple of 4 beyond z); the fallback does the
// rest.
func accumSplit(columns int) (z, n int) {
	if accumZ && basicAVX2 {
		z = columns &^ 7
	}
	return z, z + basicSplit(columns-z, 4)
}

// adamw runs adamwAVX2 over the whole vectors and adamwGo over the rest.
func adamw(s *AdamW, w, g, m, v []float32) {
	n := basicSplit(len(w), 8)
	if n > 0 {
		adamwAVX2(&w[0], &g[0], &m[0], &v[0], n, s.Decay, s.Clip, s.B1, s.C1, s.B2, s.C2, s.Bc2Sqrt, s.Eps, s.StepSize)
	}
	adamwGo(s, w[n:], g[n:], m[n:], v[n:])
}
