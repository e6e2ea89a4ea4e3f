package bf16gemm

import "unsafe"

// A pair panel is w dwords wide (mr for A, nr for B): dword p*w+j holds
// the values at depths 2p and 2p+1 of its row (A) or column (B) j. Its
// pairs come from the stored operand in one of two ways, each a contract
// with an assembly implementation (pack_amd64.go, where the CPU has
// AVX512BW) and a Go one (packgo.go, the reference the tests hold the
// assembly to, and the path of every other build):
//
//   - interleaveRows: the pair spans two stored rows (op(A) transposed,
//     op(B) untransposed): dword p*w+j = src[2p*ld+j] | src[(2p+1)*ld+j]<<16;
//   - transposePairs: the pair is adjacent in a stored row (op(A)
//     untransposed, op(B) transposed): dword p*w+r = src[r*ld+2p] |
//     src[r*ld+2p+1]<<16.
//
// Both write full pairs only (p < k/2) and only the w's columns or rows
// that exist; interleave and transpose add an odd depth's last value, and
// packA and packBPanel clear what the kernel reads past them. Packed a value at a time in Go, the
// panels cost as much as the products on the step's shapes: a third of
// the weight gradients' time (pprof, dw_fc on one core), hence assembly.

// words32 views s as its dwords; s starts on a 4-byte boundary (the
// panels are fresh buffers of even length).
func words32(s []uint16) []uint32 {
	if len(s) < 2 {
		return nil
	}
	if uintptr(unsafe.Pointer(&s[0]))%4 != 0 {
		panic("bf16gemm: a panel is not dword-aligned")
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
	if kern.aRows {
		clear(dst[:mr*kp])
		packARows(o, dst, kp, i0, rows)
		return
	}
	if rows < mr || kp > o.k+o.k%2 {
		clear(dst[:mr*kp]) // what the pairs below leave unwritten
	}
	d32 := words32(dst[:mr*kp])
	if o.aT {
		interleave(o.k, o.a[i0:], o.lda, d32, mr, rows) // op(A)(i, p) = a[p*lda + i]
	} else {
		transpose(o.k, o.a[i0*o.lda:], o.lda, d32, mr, rows)
	}
}

// interleave packs depth k of n columns whose pairs span two stored rows
// (interleaveRows), an odd depth's last value alone in its dword.
func interleave(k int, src []uint16, ld int, d []uint32, w, n int) {
	interleaveRows(k/2, src, ld, d, w, n)
	if k%2 == 1 {
		for j, v := range src[(k-1)*ld:][:n] {
			d[k/2*w+j] = uint32(v)
		}
	}
}

// transpose packs depth k of n stored rows whose pairs are adjacent
// (transposePairs), an odd depth's last value alone in its dword.
func transpose(k int, src []uint16, ld int, d []uint32, w, n int) {
	transposePairs(k/2, src, ld, d, w, n)
	if k%2 == 1 {
		for r := range n {
			d[k/2*w+r] = uint32(src[r*ld+k-1])
		}
	}
}

// packARows packs rows of op(A) as rows of kp values (the AMX layout).
func packARows(o operands, dst []uint16, kp, i0, rows int) {
	if o.aT {
		packARowsT(o, dst, kp, i0, rows)
		return
	}
	for r := range rows {
		copy(dst[r*kp:], o.a[(i0+r)*o.lda:][:o.k])
	}
}

// packARowsT is packARows of a transposed A, op(A)(i, p) = a[p*lda + i]: a
// transpose, in blocks of 4 rows by 4 depths held as four words of four
// values each (the dW products' A panels: dw_fc's GemmF32 on two threads
// 240 -> 255-265 GFLOP/s against a value at a time), the ragged edges
// value by value.
func packARowsT(o operands, dst []uint16, kp, i0, rows int) {
	r4, k4 := rows&^3, o.k&^3
	for p := 0; p < k4; p += 4 {
		s0 := o.a[p*o.lda+i0:][:rows]
		s1 := o.a[(p+1)*o.lda+i0:][:rows]
		s2 := o.a[(p+2)*o.lda+i0:][:rows]
		s3 := o.a[(p+3)*o.lda+i0:][:rows]
		for r := 0; r < r4; r += 4 {
			w0, w1, w2, w3 := transpose4(word64(s0[r:]), word64(s1[r:]), word64(s2[r:]), word64(s3[r:]))
			putWord64(dst[r*kp+p:], w0)
			putWord64(dst[(r+1)*kp+p:], w1)
			putWord64(dst[(r+2)*kp+p:], w2)
			putWord64(dst[(r+3)*kp+p:], w3)
		}
		for r := r4; r < rows; r++ {
			dst[r*kp+p], dst[r*kp+p+1], dst[r*kp+p+2], dst[r*kp+p+3] = s0[r], s1[r], s2[r], s3[r]
		}
	}
	for p := k4; p < o.k; p++ {
		for r, v := range o.a[p*o.lda+i0:][:rows] {
			dst[r*kp+p] = v
		}
	}
}

// transpose4 transposes the 4x4 block of 16-bit values whose rows are a,
// b, c, d (value j of a row in bits 16j to 16j+15): it returns the
// columns, [a0 b0 c0 d0], [a1 b1 c1 d1], ...
func transpose4(a, b, c, d uint64) (w0, w1, w2, w3 uint64) {
	const lo16, hi16 = 0x0000FFFF0000FFFF, 0xFFFF0000FFFF0000
	const lo32, hi32 = 0x00000000FFFFFFFF, 0xFFFFFFFF00000000
	ab0, ab1 := a&lo16|(b&lo16)<<16, (a>>16)&lo16|b&hi16 // [a0 b0 a2 b2], [a1 b1 a3 b3]
	cd0, cd1 := c&lo16|(d&lo16)<<16, (c>>16)&lo16|d&hi16
	return ab0&lo32 | cd0<<32, ab1&lo32 | cd1<<32, ab0>>32 | cd0&hi32, ab1>>32 | cd1&hi32
}

// word64 is s's first four values as one word (s[0] in the low bits).
func word64(s []uint16) uint64 {
	_ = s[3]
	return *(*uint64)(unsafe.Pointer(&s[0]))
}

// putWord64 stores w's four values at s[0:4] (the low bits at s[0]).
func putWord64(s []uint16, w uint64) {
	_ = s[3]
	*(*uint64)(unsafe.Pointer(&s[0])) = w
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
	cols := min(nr, o.n-j0)
	if cols < nr || kp > o.k+o.k%2 {
		clear(panel)
	}
	d32 := words32(panel) // kp*nr is even: every panel is aligned
	if o.bT {
		transpose(o.k, o.b[j0*o.ldb:], o.ldb, d32, nr, cols) // op(B)(p, j) = b[j*ldb + p]
	} else {
		interleave(o.k, o.b[j0:], o.ldb, d32, nr, cols)
	}
}
