//go:build amd64 && !purego

package qgemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg qgemm -table ../kernel_amd64_table.go

// dotFunc is the signature of the generated tile kernels (asm/main.go):
// the fields of a tile as pointers, strides in bytes; a call computes nt
// tiles of consecutive rows.
type dotFunc func(a *byte, lda int, b *int8, pstr int, corr *int32, sw *float32, bstr int, sx *float32, y *float32, ldy int, nb int, kqb int, nt int)

// archKernels lists the assembly kernels this CPU runs, best first.
// x/sys/cpu reports AVX2 and AVX-512 only when the OS saves their
// registers, and AVX-512 VNNI; AVX-VNNI (the VEX form, on CPUs without
// AVX-512 too) it does not report: CPUID leaf 7 subleaf 1, EAX bit 4 says.
func archKernels() []*kernel {
	x := cpu.X86
	var ks []*kernel
	if x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI {
		ks = append(ks, withWide(asmKernel("avx512vnni", &dotZ, true, quantRowZ), true))
	}
	if x.HasAVX2 && x.HasFMA && cpuid71EAX()&(1<<4) != 0 {
		ks = append(ks, withWide(asmKernel("avxvnni", &dotV, true, quantRowA), false))
	}
	if x.HasAVX2 && x.HasFMA {
		ks = append(ks, withWide(asmKernel("avx2", &dotA, false, quantRowA), false))
	}
	return ks
}

// asmKernel makes the kernel of one generated family; its tile limits are
// read from the table (the largest rows and panels present).
func asmKernel(name string, tbl *[2][8][8]dotFunc, unsigned bool, quant func([]byte, []float32, bool) float32) *kernel {
	k := &kernel{name: name, unsigned: unsigned, quant: quant}
	for v := range 2 {
		var s tileShape
		for mr := range 8 {
			for nv := range 8 {
				if tbl[v][mr][nv] == nil {
					continue
				}
				s.mr = max(s.mr, mr+1)
				if mr == 0 {
					s.nv1 = max(s.nv1, nv+1)
				} else {
					s.nv = max(s.nv, nv+1)
				}
			}
		}
		if s.nv == 0 { // a family of one-row tiles only
			s.nv = s.nv1
		}
		k.shapes[v] = s
	}
	k.run = func(t *tile) {
		v := 0
		if t.nb > 1 {
			v = 1
		}
		tbl[v][t.mr-1][t.nv-1](&t.a[0], t.lda, &t.b[0], t.pstr, &t.corr[0], &t.sw[0], 4*t.bstr,
			&t.sx[0], &t.y[0], 4*t.ldy, t.nb, t.kqb, t.nt)
	}
	return k
}

// quantRowZ is quantRow with the AVX-512 absolute maximum and quantizer.
func quantRowZ(dst []byte, x []float32, unsigned bool) float32 {
	return quantRow(dst, x, unsigned, 16, absMaxZ, quantZ)
}

// quantRowA is quantRow with the AVX2 absolute maximum and quantizer.
func quantRowA(dst []byte, x []float32, unsigned bool) float32 {
	return quantRow(dst, x, unsigned, 8, absMaxA, quantA)
}

// withWide gives k the weight-only kernels: AVX-512 (gemvZ, dequantZ) or
// AVX2 with FMA (gemvA, dequantA).
func withWide(k *kernel, avx512 bool) *kernel {
	gemv1, gemv2, dq := gemvA1, dotFuncGemv(nil), dequantA
	k.wname, k.gemvNV = "avx2", 1
	if avx512 {
		gemv1, gemv2, dq = gemvZ1, gemvZ2, dequantZ
		k.wname, k.gemvNV = "avx512", 2
	}
	k.gemv = func(y, x []float32, w *Weights, p0, nv int) {
		f := gemv1
		if nv == 2 {
			f = gemv2
		}
		f(&x[0], &w.codes[p0*w.kp*panelW], w.kp*panelW, &w.scales[p0*panelW], 4*w.bs*panelW, &y[0], w.nb, w.bk/kGroup)
	}
	k.dequant = func(dst []float32, ldd int, w *Weights, p, k0, k1 int) {
		// Whole dword groups (blocks for block32) in assembly, the rest
		// in Go.
		nb, kqb := 1, (k1-k0)/kGroup
		if w.nb > 1 {
			nb, kqb = (k1-k0)/w.bk, w.bk/kGroup
		}
		full := k0 + nb*kqb*kGroup
		if nb > 0 && kqb > 0 {
			dq(&dst[0], 4*ldd, &w.codes[p*w.kp*panelW+k0*panelW], &w.scales[((k0/w.bk)*w.bs+p)*panelW], 4*w.bs*panelW, nb, kqb)
		}
		if full < k1 {
			dequantGo(dst[(full-k0)*ldd:], ldd, w, p, full, k1)
		}
	}
	return k
}

// dotFuncGemv is the signature of the generated GEMV kernels.
type dotFuncGemv = func(x *float32, b *int8, pstr int, sw *float32, bstr int, y *float32, nb int, kqb int)
