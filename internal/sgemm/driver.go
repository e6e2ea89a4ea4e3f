package sgemm

import "gptlab/internal/sgemm/internal/blasarg"

// packAtColumns is the width of C from which Aᵀ is packed rather than read
// in place (measured on Zen 3: in place wins at 128 columns, packing at 512).
const packAtColumns = 256

// problem is one checked call C = alpha*op(A)*op(B) + beta*C, possibly a
// block of rows or columns of a larger one.
type problem struct {
	kern    *kernel
	aT, bT  bool // op(A) = Aᵀ, op(B) = Bᵀ
	m, n, k int
	alpha   float32
	a       []float32
	lda     int
	b       []float32
	ldb     int
	beta    float32
	c       []float32
	ldc     int
	// pack, if not nil, packs B in place of packB (SgemmPackedB), its
	// columns from bj on (a block of columns of the whole product).
	pack PackB
	bj   int
	// packed, if not nil, holds all of op(B) packed (a parallel product's
	// row chunks share one packing, packSharedB): depth block pc's panels
	// start at pc·roundUp(n, nr). It needs n <= nc.
	packed []float32
}

// rows returns the sub-problem of rows [i0, i1) of C.
func (p problem) rows(i0, i1 int) problem {
	if p.aT {
		p.a = p.a[i0:]
	} else {
		p.a = p.a[i0*p.lda:]
	}
	p.c = p.c[i0*p.ldc:]
	p.m = i1 - i0
	return p
}

// cols returns the sub-problem of columns [j0, j1) of C.
func (p problem) cols(j0, j1 int) problem {
	if p.pack != nil {
		p.bj += j0
	} else if p.bT {
		p.b = p.b[j0*p.ldb:]
	} else {
		p.b = p.b[j0:]
	}
	p.c = p.c[j0:]
	p.n = j1 - j0
	return p
}

// run computes the problem on one goroutine with scratch s (BLIS loop
// order: columns of B by nc, depth by kc, rows of A by mc, then micro-tiles).
// It needs alpha != 0 and k > 0.
//
// B is packed (contiguous panels, zero-padded), except a row-major op(B)
// on a kernel family with strideFunc variants: its full-width panels are
// read in place and only a last, narrower one is packed (readsB). A is
// read in place when the kernel family can (full row panels only);
// otherwise A is packed, which also absorbs the transpose.
func (p *problem) run(s *scratch) {
	kn := p.kern
	mr, nr := kn.mr, kn.nr
	overwrite := p.beta == 0
	if !overwrite {
		blasarg.Scale(p.beta, p.m, p.n, p.c, p.ldc)
	}
	s.grow(kn)
	full, half := kn.rows, kn.rowsHalf // kernels reading A in place
	if p.aT {
		full, half = kn.cols, kn.colsHalf
	}
	strided := p.readsB()
	for jc := 0; jc < p.n; jc += kn.nc {
		nb := min(kn.nc, p.n-jc)
		inB := 0 // columns of this block whose panels are read in place
		if strided {
			inB = nb / nr * nr
		}
		// Aᵀ read in place touches one cache line per depth step, and
		// power-of-two strides alias in L1: when many column panels reuse
		// each A panel, packing it once is cheaper.
		inPlace := full != nil && !(p.aT && nb >= packAtColumns)
		lastW := kn.lastWidth(nb)
		for pc := 0; pc < p.k; pc += kn.kc {
			kb := min(kn.kc, p.k-pc)
			bb := s.b // this depth block's panels
			switch {
			case p.packed != nil:
				bb = p.packed[pc*roundUp(p.n, nr):]
			case p.pack != nil:
				p.pack(s.b[:roundUp(nb, nr)*kb], nr, lastW, pc, p.bj+jc, kb, nb)
			case inB < nb: // the panels from inB on, packed from s.b on
				p.packB(s.b, nr, lastW, pc, jc+inB, kb, nb-inB)
			}
			acc := pc > 0 || !overwrite
			for ic := 0; ic < p.m; ic += kn.mc {
				mb := min(kn.mc, p.m-ic)
				if !inPlace {
					p.packA(s.a, mr, ic, pc, 0, mb, kb)
				} else if rem := mb % mr; rem != 0 {
					// The partial row panel is packed (zero-padded) after the
					// in-place ones.
					p.packA(s.a, mr, ic, pc, mb-rem, mb, kb)
				}
				for jr := 0; jr < nb; jr += nr {
					w := nr
					if jr+nr > nb {
						w = lastW
					}
					nw := min(w, nb-jr)
					if jr < inB {
						p.tilesB(s, ic, mb, pc, kb, jc+jr, inPlace, acc)
						continue
					}
					bp := &bb[((jr-inB)/nr)*kb*nr]
					for ir := 0; ir < mb; ir += mr {
						mrr := min(mr, mb-ir)
						fn, ap, lda := kn.packed, &s.a[(ir/mr)*kb*mr], 0
						if inPlace && mrr == mr {
							fn, lda = full, p.lda
							if p.aT {
								ap = &p.a[pc*p.lda+ic+ir]
							} else {
								ap = &p.a[(ic+ir)*p.lda+pc]
							}
							if w < nr {
								fn = half
							}
						} else if w < nr {
							fn = kn.packedHalf
						}
						off := (ic+ir)*p.ldc + jc + jr
						if mrr == mr && nw == w {
							fn(kb, ap, lda, bp, &p.c[off], p.ldc, p.alpha, acc)
							continue
						}
						fn(kb, ap, lda, bp, &s.t[0], w, p.alpha, false)
						p.storeTile(off, s.t, w, mrr, nw, acc)
					}
				}
			}
		}
	}
}

// readsB reports whether run reads op(B)'s full-width panels in place: a
// row-major B (not Bᵀ) that no PackB or shared packing stands in for, on a
// kernel family with strideFunc variants, in a product of fewer rows than
// the kernel's packBRows.
func (p *problem) readsB() bool {
	if readB == readBNever || p.bT || p.pack != nil || p.packed != nil || p.kern.packedS == nil {
		return false
	}
	return readB == readBAlways || p.kern.packBRows == 0 || p.m < p.kern.packBRows
}

// readBMode is how run treats a row-major B that a kernel family can read
// in place.
type readBMode int

const (
	readBByRule readBMode = iota // in place below the kernel's packBRows (the default)
	readBAlways                  // in place whatever the rows
	readBNever                   // packed
)

// readB is the mode run follows (tests compare the three; the bits are
// the same).
var readB = readBByRule

// tilesB computes the mr×nr tiles of rows [ic, ic+mb) of C and the nr
// columns from j of B read in place, for depth block pc (kb deep): run's
// inner loop for one panel of B, with A as run reads it (packed in s.a
// unless inPlace).
func (p *problem) tilesB(s *scratch, ic, mb, pc, kb, j int, inPlace, acc bool) {
	kn := p.kern
	mr, nr := kn.mr, kn.nr
	bp := &p.b[pc*p.ldb+j]
	for ir := 0; ir < mb; ir += mr {
		mrr := min(mr, mb-ir)
		fn, ap, lda := kn.packedS, &s.a[(ir/mr)*kb*mr], 0
		if inPlace && mrr == mr {
			fn, lda = kn.rowsS, p.lda
			if p.aT {
				fn, ap = kn.colsS, &p.a[pc*p.lda+ic+ir]
			} else {
				ap = &p.a[(ic+ir)*p.lda+pc]
			}
		}
		off := (ic+ir)*p.ldc + j
		if mrr == mr {
			fn(kb, ap, lda, bp, p.ldb, &p.c[off], p.ldc, p.alpha, acc)
			continue
		}
		fn(kb, ap, lda, bp, p.ldb, &s.t[0], nr, p.alpha, false)
		p.storeTile(off, s.t, nr, mrr, nr, acc)
	}
}

// storeTile writes (or with acc adds) the mrr×nw top left of tile t (rows
// w apart) into C from element off on.
func (p *problem) storeTile(off int, t []float32, w, mrr, nw int, acc bool) {
	for i := 0; i < mrr; i++ {
		dst := p.c[off+i*p.ldc : off+i*p.ldc+nw]
		src := t[i*w : i*w+nw]
		if acc {
			for j, v := range src {
				dst[j] += v
			}
		} else {
			copy(dst, src)
		}
	}
}

// lastWidth is the width of the last panel of nb columns of B: half a
// panel when that covers it and the kernel has half-width variants.
func (kn *kernel) lastWidth(nb int) int {
	if rem := nb % kn.nr; rem != 0 && rem <= kn.nr/2 && kn.packedHalf != nil {
		return kn.nr / 2
	}
	return kn.nr
}

// packA packs rows [ic+i0, ic+i1) (i0 a multiple of mr) and depth
// [pc, pc+kb) of op(A) into dst as panels of mr rows: panel q holds, for
// each p, the mr values op(A)[ic+q*mr+i, pc+p]; rows past i1 are zero.
func (p *problem) packA(dst []float32, mr, ic, pc, i0, i1, kb int) {
	lda := p.lda
	if p.aT {
		// op(A)[i, q] = a[q*lda + i]: stored row q holds the values of
		// depth q for every row panel; read it once, in order.
		full := i0 + (i1-i0)/mr*mr
		for q := 0; q < kb; q++ {
			src := p.a[(pc+q)*lda+ic : (pc+q)*lda+ic+i1]
			for ir := i0; ir < full; ir += mr {
				copyN(dst[(ir/mr)*kb*mr+q*mr:], src[ir:], mr)
			}
			if full < i1 {
				d := dst[(full/mr)*kb*mr+q*mr:][:mr]
				n := copy(d, src[full:])
				clear(d[n:])
			}
		}
		return
	}
	for ir := i0; ir < i1; ir += mr {
		mrr := min(mr, i1-ir)
		panel := dst[(ir/mr)*kb*mr : (ir/mr+1)*kb*mr]
		// op(A)[i, q] = a[i*lda + q]: read rows, write strided.
		for i := 0; i < mrr; i++ {
			src := p.a[(ic+ir+i)*lda+pc:][:kb]
			for q, v := range src {
				panel[q*mr+i] = v
			}
		}
		if mrr < mr {
			for q := 0; q < kb; q++ {
				clear(panel[q*mr+mrr : q*mr+mr])
			}
		}
	}
}

// packB packs depth [pc, pc+kb) and columns [jc, jc+nb) of op(B) into dst
// as panels of nr columns, the last one lastW wide: panel q starts at
// q*kb*nr and holds, for each p, the values op(B)[pc+p, jc+q*nr+j]; columns
// past nb are zero.
func (p *problem) packB(dst []float32, nr, lastW, pc, jc, kb, nb int) {
	ldb := p.ldb
	if !p.bT {
		full := nb / nr * nr
		if lastW < nr && nb-full == lastW {
			full = nb // the half-width last panel is full too
		}
		p.packBRows(dst, nr, lastW, pc, jc, kb, full)
	}
	for jr := 0; jr < nb; jr += nr {
		w := nr
		if jr+nr > nb {
			w = lastW
		}
		nw := min(w, nb-jr)
		panel := dst[(jr/nr)*kb*nr:][:kb*w]
		if !p.bT {
			// op(B)[q, j] = b[q*ldb + j]: rows are contiguous. Full panels
			// are packed by packBRows below.
			if nw == w {
				continue
			}
			for q := 0; q < kb; q++ {
				d := panel[q*w : q*w+w]
				copy(d, p.b[(pc+q)*ldb+jc+jr:][:nw])
				clear(d[nw:])
			}
			continue
		}
		// op(B)[q, j] = b[j*ldb + q]: transpose 8×8 blocks, or read rows of
		// B and write strided.
		if t8 := p.kern.transpose8; t8 != nil && nw == w && w%8 == 0 && kb >= 8 {
			k8 := kb / 8 * 8
			for j := 0; j < w; j += 8 {
				t8(&panel[j], &p.b[(jc+jr+j)*ldb+pc], ldb, w, kb/8)
			}
			for j := 0; j < w && k8 < kb; j++ {
				src := p.b[(jc+jr+j)*ldb+pc:][:kb]
				for q := k8; q < kb; q++ {
					panel[q*w+j] = src[q]
				}
			}
			continue
		}
		for j := 0; j < nw; j++ {
			src := p.b[(jc+jr+j)*ldb+pc:][:kb]
			for q, v := range src {
				panel[q*w+j] = v
			}
		}
		if nw < w {
			for q := 0; q < kb; q++ {
				clear(panel[q*w+nw : q*w+w])
			}
		}
	}
}

// packBRows packs the full panels of columns [jc, jc+nf) of a row-major
// op(B) = B (see packB). It walks eight rows of B at a time across all
// panels: reading B down one panel at a time touches a new cache line per
// row and, with B beyond L2, runs at memory latency.
func (p *problem) packBRows(dst []float32, nr, lastW, pc, jc, kb, nf int) {
	ldb := p.ldb
	if cr := p.kern.copyRows; cr != nil && nf > 0 {
		nfull := nf / nr // full-width panels; a half-width one may follow
		for q0 := 0; q0 < kb; q0 += 8 {
			rows := min(8, kb-q0)
			src := (pc+q0)*ldb + jc
			if nfull > 0 {
				cr(&dst[q0*nr], &p.b[src], ldb, rows, nfull, nr, kb*nr)
			}
			if nf > nfull*nr {
				cr(&dst[nfull*kb*nr+q0*lastW], &p.b[src+nfull*nr], ldb, rows, 1, lastW, 0)
			}
		}
		return
	}
	for q0 := 0; q0 < kb; q0 += 8 {
		q1 := min(q0+8, kb)
		for jr := 0; jr < nf; jr += nr {
			w := min(nr, nf-jr)
			if w < nr {
				w = lastW
			}
			panel := dst[(jr/nr)*kb*nr:][:kb*w]
			for q := q0; q < q1; q++ {
				copyN(panel[q*w:], p.b[(pc+q)*ldb+jc+jr:], w)
			}
		}
	}
}

// copyN copies the first n values of src to dst with inline moves for the
// panel widths of the kernels (copy calls memmove, slow for a few values;
// the copy goes through a local so the compiler need not assume overlap).
func copyN(dst, src []float32, n int) {
	switch n {
	case 4:
		v := *(*[4]float32)(src)
		*(*[4]float32)(dst) = v
	case 6:
		v := *(*[6]float32)(src)
		*(*[6]float32)(dst) = v
	case 8:
		v := *(*[8]float32)(src)
		*(*[8]float32)(dst) = v
	case 12:
		v := *(*[12]float32)(src)
		*(*[12]float32)(dst) = v
	case 16:
		v := *(*[16]float32)(src)
		*(*[16]float32)(dst) = v
	case 32:
		v := *(*[32]float32)(src)
		*(*[32]float32)(dst) = v
	default:
		copy(dst[:n], src[:n])
	}
}
