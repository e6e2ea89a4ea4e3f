package sgemm

import "unsafe"

// refKernel returns a plain-Go kernelFunc for an mr×w tile reading A in
// form 'P' (packed), 'R' (in place by rows) or 'C' (in place by columns):
// the contract every assembly kernel implements.
func refKernel(mr, w int, form byte) kernelFunc {
	s := refKernelS(mr, w, form)
	return func(k int, a *float32, lda int, b, c *float32, ldc int, alpha float32, acc bool) {
		s(k, a, lda, b, w, c, ldc, alpha, acc)
	}
}

// refKernelS is refKernel reading B in place, B(p,j) = b[p*ldb+j]: the
// contract of the strideFunc kernels (ldb = w is a packed panel).
func refKernelS(mr, w int, form byte) strideFunc {
	return func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32, acc bool) {
		var alen int
		switch form {
		case 'P':
			alen = mr * k
		case 'R':
			alen = (mr-1)*lda + k
		case 'C':
			alen = (k-1)*lda + mr
		}
		as := unsafe.Slice(a, alen)
		bs := unsafe.Slice(b, (k-1)*ldb+w)
		cs := unsafe.Slice(c, (mr-1)*ldc+w)
		for i := 0; i < mr; i++ {
			for j := 0; j < w; j++ {
				var s float32
				for p := 0; p < k; p++ {
					var av float32
					switch form {
					case 'P':
						av = as[p*mr+i]
					case 'R':
						av = as[i*lda+p]
					case 'C':
						av = as[p*lda+i]
					}
					s += av * bs[p*ldb+j]
				}
				if acc {
					cs[i*ldc+j] += alpha * s
				} else {
					cs[i*ldc+j] = alpha * s
				}
			}
		}
	}
}

// emuKernel512 has the AVX-512 kernel family's tile, blocking and
// transpose8 with reference Go kernels, so the driver's handling of that
// family (12-row panels, 32- and 16-wide B panels) is tested on machines
// without AVX-512. The assembly kernels themselves come from the same
// generator code as the AVX2 ones.
func emuKernel512() *kernel {
	var t8 func(dst, src *float32, ld, dstStride, nblk int)
	for _, k := range kernels {
		if k.transpose8 != nil {
			t8 = k.transpose8
		}
	}
	return &kernel{name: "emu512", mr: 12, nr: 32, mc: 144, kc: 256, nc: 2048,
		packed: refKernel(12, 32, 'P'), rows: refKernel(12, 32, 'R'), cols: refKernel(12, 32, 'C'),
		packedHalf: refKernel(12, 16, 'P'), rowsHalf: refKernel(12, 16, 'R'), colsHalf: refKernel(12, 16, 'C'),
		packedS: refKernelS(12, 32, 'P'), rowsS: refKernelS(12, 32, 'R'), colsS: refKernelS(12, 32, 'C'),
		transpose8: t8}
}
