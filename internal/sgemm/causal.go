package sgemm

import "fmt"

// The products of causal attention, on one (T, T) item whose useful part
// is its lower triangle: the scores q·kᵀ on and below the diagonal, and
// products with a lower-triangular L (the probabilities, or the scores'
// gradient) from the left, as L or as Lᵀ. Sgemm computes them by blocks
// of rows, each block a call that packs again what the last one packed
// and computes its square diagonal block in full; these functions walk
// the micro-tiles of one call instead and stop each row panel at the
// diagonal, so that about half a full product is computed, with B packed
// once a call.
//
// L's entries above its diagonal must be zero (a causal softmax's are, and
// so are its gradient's): a full row panel reads L in place to the end of
// its diagonal block, where those zeros add nothing, instead of packing
// the block with its upper part zeroed and adding its sum in a second
// call (on a 64×64 item with 32 columns, one thread: LB 38 -> 51 and LtB
// 52 -> 74 GFLOP/s). Past the diagonal block nothing above the diagonal
// is read.
//
// They run on the calling goroutine (a batch of items splits across
// items) with the active kernel. Row panels of the kernel's mr rows start
// at r0, and each C element is one kernel call's sum over its depth (the
// zeros of L past its triangle add nothing), so a block of rows starting
// at a multiple of mr gives the bits the whole call gives (MaxRowPanel:
// a multiple of every kernel's mr).

// MaxRowPanel is a multiple of the row panel (mr) of every kernel: rows
// split into blocks of a multiple of it get the same bits from LowerABt
// and LowerLB as the whole call.
const MaxRowPanel = 24

// causalKind selects a causal product.
type causalKind int

const (
	causalABt causalKind = iota // C = A·Bᵀ on and below the diagonal
	causalLB                    // C = L·B, L lower triangular
	causalLtB                   // C = Lᵀ·B, L lower triangular
)

// LowerABt sets rows [r0, r1) of C = A·Bᵀ on and below the diagonal:
// C[i][j] = Σ_p A[i][p]·B[j][p] for j ≤ i, for row-major A and B of depth
// k. a and c point at row r0 (of A and C), b at row 0 of B, which needs
// r1 rows. Entries above the diagonal up to the end of a row's panel of
// mr rows may be overwritten; the rest of C is not touched.
func LowerABt(r0, r1, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	causalCheck("LowerABt", r0, r1, k, r1, a, lda, k, b, ldb, k, c, ldc, r1)
	causal(active.Load(), causalABt, r0, r1, k, a, lda, b, ldb, c, ldc)
}

// LowerLB sets rows [r0, r1) of C = L·B for a lower-triangular L, zero
// above its diagonal: C[i] = Σ_{j≤i} L[i][j]·B[j]. l and c
// point at row r0 (of L and C), b at row 0 of B (n columns), which needs
// r1 rows.
func LowerLB(r0, r1, n int, l []float32, ldl int, b []float32, ldb int, c []float32, ldc int) {
	causalCheck("LowerLB", r0, r1, n, r1, l, ldl, r1, b, ldb, n, c, ldc, n)
	causal(active.Load(), causalLB, r0, r1, n, l, ldl, b, ldb, c, ldc)
}

// LowerLtB sets C = Lᵀ·B for a lower-triangular t×t L, zero above its
// diagonal: C[i] = Σ_{j≥i} L[j][i]·B[j]; B and C are t×n.
func LowerLtB(t, n int, l []float32, ldl int, b []float32, ldb int, c []float32, ldc int) {
	causalCheck("LowerLtB", 0, t, n, t, l, ldl, t, b, ldb, n, c, ldc, n)
	causal(active.Load(), causalLtB, 0, t, n, l, ldl, b, ldb, c, ldc)
}

// causalCheck panics, as Sgemm does, on arguments that do not describe
// the matrices: rows [r0, r1) of a (width aw) and c (width cw), bRows rows
// of b (width bw).
func causalCheck(name string, r0, r1, n, bRows int, a []float32, lda, aw int, b []float32, ldb, bw int, c []float32, ldc, cw int) {
	bad := r0 < 0 || r1 < r0 || n < 0 || lda < max(1, aw) || ldb < max(1, bw) || ldc < max(1, cw)
	if !bad && r1 > r0 && n > 0 {
		m := r1 - r0
		bad = len(a) < (m-1)*lda+aw || len(b) < (bRows-1)*ldb+bw || len(c) < (m-1)*ldc+cw
	}
	if bad {
		panic(fmt.Sprintf("sgemm: %s rows [%d, %d) n %d lda %d ldb %d ldc %d, len(a) %d len(b) %d len(c) %d",
			name, r0, r1, n, lda, ldb, ldc, len(a), len(b), len(c)))
	}
}

// causal computes a causal product with kernel kn (see LowerABt, LowerLB
// and LowerLtB; n is ABt's depth or the columns of B).
func causal(kn *kernel, kind causalKind, r0, r1, n int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if r1 == r0 {
		return
	}
	if n == 0 { // no columns of B, or ABt's empty sums: zeros on and below the diagonal
		for i := r0; kind == causalABt && i < r1; i++ {
			clear(c[(i-r0)*ldc : (i-r0)*ldc+i+1])
		}
		return
	}
	mr, nr := kn.mr, kn.nr
	// op(B) is depth × cols: Bᵀ (k × r1) for ABt, B (r1 × n) otherwise.
	depth, cols, bT := r1, n, false
	if kind == causalABt {
		depth, cols, bT = n, r1, true
	}
	s := getScratch()
	defer putScratch(s)
	s.grow(kn)
	bp, ap := s.b, s.a
	if need := roundUp(cols, nr) * depth; len(bp) < need {
		bp = make([]float32, need)
	}
	if need := mr * (depth + mr); len(ap) < need { // LB packs a partial panel to ir+mr
		ap = make([]float32, need)
	}
	// B packed once, as one block of the whole depth: panel q at
	// q·depth·nr, depth p of it at p·nr; a row-major B's full panels are
	// read in place instead (readsB), and only the columns from inB on
	// packed, from bp on.
	pb := problem{kern: kn, b: b, ldb: ldb, bT: bT}
	inB := 0
	if pb.readsB() {
		inB = cols / nr * nr
	}
	if inB < cols {
		pb.packB(bp, nr, nr, 0, inB, depth, cols-inB)
	}
	// Each row panel is one kernel call over its depth. A full panel is
	// read in place where the kernel family can: A's rows for ABt, L's
	// rows for LB (to the end of the panel's diagonal block, whose entries
	// above the diagonal are L's zeros), L's columns for LtB (from the
	// panel's diagonal block down, the same). A partial panel is packed,
	// zero-padded, with L's upper part zeroed.
	for ir := r0; ir < r1; ir += mr {
		mrr := min(mr, r1-ir)
		full := mrr == mr
		c1 := cols // columns [0, c1)
		var fn kernelFunc
		var fnS strideFunc // fn reading B in place
		var pa *float32
		var lpa, d0, d1 int // A's leading dimension (0: packed), depth [d0, d1)
		switch kind {
		case causalABt:
			c1, d1 = ir+mrr, depth
			if full && kn.rows != nil {
				fn, pa, lpa = kn.rows, &a[(ir-r0)*lda], lda
				break
			}
			pp := problem{a: a[(ir-r0)*lda:], lda: lda}
			pp.packA(ap, mr, 0, 0, 0, mrr, depth)
			fn, fnS, pa = kn.packed, kn.packedS, &ap[0]
		case causalLB:
			lr := a[(ir-r0)*lda:] // row ir of L
			d1 = ir + mrr
			if full && kn.rows != nil {
				fn, fnS, pa, lpa = kn.rows, kn.rowsS, &lr[0], lda
				break
			}
			packLowerRows(ap, mr, lr, lda, ir, mrr)
			fn, fnS, pa = kn.packed, kn.packedS, &ap[0]
		case causalLtB:
			d0, d1 = ir, depth
			if full && kn.cols != nil {
				fn, fnS, pa, lpa = kn.cols, kn.colsS, &a[ir*lda+ir], lda
				break
			}
			packLowerCols(ap, mr, a, lda, ir, mrr, depth)
			fn, fnS, pa = kn.packed, kn.packedS, &ap[0]
		}
		crow := c[(ir-r0)*ldc:]
		for jr := 0; jr < c1; jr += nr {
			nw := min(nr, c1-jr)
			dst, ldd := &crow[jr], ldc
			if !full || nw < nr {
				dst, ldd = &s.t[0], nr
			}
			if jr < inB {
				fnS(d1-d0, pa, lpa, &b[d0*ldb+jr], ldb, dst, ldd, 1, false)
			} else {
				fn(d1-d0, pa, lpa, &bp[((jr-inB)/nr)*depth*nr+d0*nr], dst, ldd, 1, false)
			}
			if dst == &s.t[0] {
				for i := range mrr {
					copy(crow[i*ldc+jr:i*ldc+jr+nw], s.t[i*nr:i*nr+nw])
				}
			}
		}
	}
}

// packLowerRows packs rows [ir, ir+mrr) of a lower-triangular L, depth
// [0, ir+mr), as one A panel of mr rows (packA's layout): l points at row
// ir; entries above the diagonal and rows past mrr are zero.
func packLowerRows(dst []float32, mr int, l []float32, ldl, ir, mrr int) {
	d1 := ir + mr
	panel := dst[:d1*mr]
	for i := range mr {
		q1 := 0 // row ir+i's entries on and below the diagonal: [0, q1)
		if i < mrr {
			q1 = ir + i + 1
			for q, v := range l[i*ldl : i*ldl+q1] {
				panel[q*mr+i] = v
			}
		}
		for q := q1; q < d1; q++ {
			panel[q*mr+i] = 0
		}
	}
}

// packLowerCols packs rows [ir, ir+mrr) of Lᵀ for a lower-triangular L,
// depth [ir, d1), as one A panel of mr rows: depth q holds L[q][ir+i],
// zero where that is above L's diagonal (q < ir+i) and for rows past mrr.
func packLowerCols(dst []float32, mr int, l []float32, ldl, ir, mrr, d1 int) {
	for q := ir; q < d1; q++ {
		d := dst[(q-ir)*mr : (q-ir+1)*mr]
		n := min(mrr, q-ir+1) // columns ir..ir+n-1 of row q are on or below its diagonal
		copy(d[:n], l[q*ldl+ir:q*ldl+ir+n])
		clear(d[n:])
	}
}
