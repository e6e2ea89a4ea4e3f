package bf16gemm

import "unsafe"

// The panels are written a dword (one pair of depths) at a time: where a
// pair is adjacent in the stored operand (op(A) untransposed, op(B)
// transposed) it is copied as a dword; where it spans two stored rows it
// is put together from them. Both are several times faster than placing
// each 16-bit value on its own (measured: BenchmarkGemm's small-n shapes,
// whose A panels are packed for few column panels).

// words32 views s as its dwords, or returns nil when s does not start
// on a 4-byte boundary (the caller then copies values one at a time).
func words32(s []uint16) []uint32 {
	if len(s) < 2 || uintptr(unsafe.Pointer(&s[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&s[0])), len(s)/2)
}

// pair is the dword of a bf16 pair: lo at the even depth, hi at the odd.
func pair(lo, hi uint16) uint32 { return uint32(lo) | uint32(hi)<<16 }

// packA packs rows [i0, i0+mr) of op(A), depth padded to kp, into dst in
// the kernel's A layout; rows past m and depths past k are zero.
func packA(kern *kernel, o operands, dst []uint16, kp, i0 int) {
	mr := kern.mr
	rows := min(mr, o.m-i0)
	clear(dst[:mr*kp])
	if kern.aRows {
		packARows(o, dst, kp, i0, rows)
		return
	}
	d32 := words32(dst[:mr*kp]) // dst is a fresh aligned buffer: never nil
	if o.aT {
		// op(A)(i, p) = a[p*lda + i]: pair p is stored rows 2p and 2p+1.
		for p := 0; p < o.k; p += 2 {
			lo := o.a[p*o.lda+i0:][:rows]
			d := d32[(p>>1)*mr:][:rows]
			if p+1 == o.k {
				for r, v := range lo {
					d[r] = uint32(v)
				}
				break
			}
			hi := o.a[(p+1)*o.lda+i0:][:rows]
			for r, v := range lo {
				d[r] = pair(v, hi[r])
			}
		}
		return
	}
	for r := range rows {
		src := o.a[(i0+r)*o.lda:][:o.k]
		s32 := words32(src)
		if s32 == nil {
			for p, v := range src {
				dst[(p>>1)*2*mr+2*r+p&1] = v
			}
			continue
		}
		for p, v := range s32 {
			d32[p*mr+r] = v
		}
		if o.k%2 == 1 {
			d32[(o.k>>1)*mr+r] = uint32(src[o.k-1])
		}
	}
}

// packARows packs rows of op(A) as rows of kp values (the AMX layout).
func packARows(o operands, dst []uint16, kp, i0, rows int) {
	if o.aT {
		// op(A)(i, p) = a[p*lda + i]: read stored rows in order.
		for p := range o.k {
			for r, v := range o.a[p*o.lda+i0:][:rows] {
				dst[r*kp+p] = v
			}
		}
		return
	}
	for r := range rows {
		copy(dst[r*kp:], o.a[(i0+r)*o.lda:][:o.k])
	}
}

// packB packs all of op(B), depth padded to kp, into dst as panels of nr
// columns of pairs: panel q at q*kp*nr holds op(B)(2p+h, q*nr+j) at
// 2*(p*nr+j)+h; columns past n and depths past k are zero.
func packB(kern *kernel, o operands, dst []uint16, kp int) {
	for q := range (o.n + kern.nr - 1) / kern.nr {
		packBPanel(kern, o, dst, kp, q)
	}
}

// packBPanel packs panel q of op(B) (columns [q*nr, q*nr+nr)) into its
// place in dst, as packB lays it out.
func packBPanel(kern *kernel, o operands, dst []uint16, kp, q int) {
	nr := kern.nr
	j0 := q * nr
	panel := dst[q*kp*nr:][:kp*nr]
	clear(panel)
	d32 := words32(panel) // kp*nr is even: every panel is aligned
	cols := min(nr, o.n-j0)
	if o.bT {
		// op(B)(p, j) = b[j*ldb + p]: a stored row holds column j's
		// depths, pairs adjacent.
		for j := range cols {
			src := o.b[(j0+j)*o.ldb:][:o.k]
			s32 := words32(src)
			if s32 == nil {
				for p, v := range src {
					panel[2*((p>>1)*nr+j)+p&1] = v
				}
				continue
			}
			for p, v := range s32 {
				d32[p*nr+j] = v
			}
			if o.k%2 == 1 {
				d32[(o.k>>1)*nr+j] = uint32(src[o.k-1])
			}
		}
		return
	}
	// op(B)(p, j) = b[p*ldb + j]: pair p is stored rows 2p and 2p+1.
	for p := 0; p < o.k; p += 2 {
		lo := o.b[p*o.ldb+j0:][:cols]
		d := d32[(p>>1)*nr:][:cols]
		if p+1 == o.k {
			for j, v := range lo {
				d[j] = uint32(v)
			}
			break
		}
		hi := o.b[(p+1)*o.ldb+j0:][:cols]
		for j, v := range lo {
			d[j] = pair(v, hi[j])
		}
	}
}
