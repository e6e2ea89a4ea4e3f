package pgemm

import "unsafe"

// groupRows returns a kernel of m rows made of fs (fs[r-1] a kernel of r
// rows): fs[m-1] itself where there is one, or else one call on each of
// the fewest groups of at most len(fs) consecutive rows, of sizes that
// differ by at most one (eight rows of kernels of up to three are 2+3+3,
// not 3+3+2's last call of fewer chains… nor 3+3+1's single one). A group
// starting at row i reads A from a+i·lda and writes C from c+i·ldc; with
// ownPanel (Rows' kernels, row i against B+i·bstride) its B starts at
// b+i·bstride, and elsewhere every group reads the same panels. Each row
// of C is computed by one kernel alone, so the result is bitwise that of
// one kernel of m rows with the same contract.
func groupRows(fs []kernelFunc, m int, ownPanel bool) kernelFunc {
	if m <= len(fs) {
		return fs[m-1]
	}
	n := (m + len(fs) - 1) / len(fs)
	return func(k int, a *float32, lda int, b *float32, bs int, c *float32, ldc int) {
		i := 0
		for g := range n {
			r := (m - i) / (n - g) // smaller groups first
			bi := b
			if ownPanel {
				bi = offset(b, i*bs)
			}
			fs[r-1](k, offset(a, i*lda), lda, bi, bs, offset(c, i*ldc), ldc)
			i += r
		}
	}
}

// offset is p+n elements.
func offset(p *float32, n int) *float32 {
	return (*float32)(unsafe.Add(unsafe.Pointer(p), n*4))
}
