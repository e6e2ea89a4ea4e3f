package bf16gemm

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// causal.go: the products of causal attention on one (T, T) item of bf16
// operands, as internal/sgemm's LowerABt, LowerLB and LowerLtB compute
// them in float32: the scores q·kᵀ on and below the diagonal, and products
// with a lower-triangular L (the probabilities, or the scores' gradient)
// as L or as Lᵀ. Each row panel of the kernel's mr rows stops at the
// diagonal: ABt computes the column panels up to the end of the panel's
// diagonal block, LB sums L's depths up to it and LtB from it on (the
// entries of L above its diagonal, read to the end of a panel's pairs,
// must be zero, as a causal softmax's and its gradient's are).
//
// On the VDPBF16PS kernel, op(B) is packed once a call and a full row
// panel of a row-major A (the scores' q, L for LB) is read where it is
// stored (dotTile12x32s), so that only LtB's Lᵀ is packed: on a 64×64
// item with 32 columns, one Zen 5 core, LB 2.2x, ABt 2.0x and LtB 1.1x
// sgemm's float32 products, where packing A too made LB 1.3x. Each C
// element is one kernel call's sum over its depth in the kernel's order.
// On widen the operands are widened, exactly, and sgemm's products run.
// Which of the two a kind of product takes on an item size is calibrated
// as Gemm's shapes are (CausalFor), or forced by GPTLAB_BF16 (widen or
// avx512bf16; amx, which has no causal kernel, leaves them calibrated).

// CausalKind is one of the three causal products.
type CausalKind int

const (
	CausalABt CausalKind = iota // C = A·Bᵀ on and below the diagonal
	CausalLB                    // C = L·B, L lower triangular
	CausalLtB                   // C = Lᵀ·B, L lower triangular
)

func (k CausalKind) String() string { return [...]string{"A·Bᵀ lower", "L·B", "Lᵀ·B"}[k] }

// CausalKernel computes the causal products on one path: the VDPBF16PS
// kernel, or widen (k nil).
type CausalKernel struct{ k *kernel }

// Path is the kernel's path name: avx512bf16 or widen.
func (ck CausalKernel) Path() string {
	if ck.k == nil {
		return "widen"
	}
	return ck.k.name
}

// causalScratch is one call's packed panels, edge tile and widened
// operands.
type causalScratch struct {
	a, b []uint16
	t    []float32
	w    [2][]float32
}

var causalPool = sync.Pool{New: func() any { return new(causalScratch) }}

// LowerABt sets rows [r0, r1) of C = A·Bᵀ on and below the diagonal:
// C[i][j] = Σ_p A[i][p]·B[j][p] for j ≤ i, A and B row-major of depth k. a
// and c point at row r0 (of A and C), b at row 0 of B, which needs r1
// rows. Entries above the diagonal up to the end of a row's panel may be
// overwritten; the rest of C is not touched. r0 must be a multiple of
// CausalRowPanel for the rows to get the whole call's bits.
func (ck CausalKernel) LowerABt(r0, r1, k int, a []uint16, lda int, b []uint16, ldb int, c []float32, ldc int) {
	o := operands{bT: true, m: r1 - r0, n: r1, k: k, a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	if r0 < 0 || r1 < r0 {
		panic(fmt.Sprintf("bf16gemm: LowerABt rows [%d, %d)", r0, r1))
	}
	o.check(blas.NoTrans, blas.Trans, len(a), len(b))
	ck.causal(CausalABt, o, r0, func(i0, rows int) (d0, d1, cols int) { return 0, k, r0 + i0 + rows })
}

// LowerLB sets C = L·B for a t×t L, zero above its diagonal, and a t×n B:
// C[i] = Σ_{j≤i} L[i][j]·B[j].
func (ck CausalKernel) LowerLB(t, n int, l []uint16, ldl int, b []uint16, ldb int, c []float32, ldc int) {
	o := operands{m: t, n: n, k: t, a: l, lda: ldl, b: b, ldb: ldb, c: c, ldc: ldc}
	o.check(blas.NoTrans, blas.NoTrans, len(l), len(b))
	ck.causal(CausalLB, o, 0, func(i0, rows int) (d0, d1, cols int) { return 0, i0 + rows, n })
}

// LowerLtB sets C = Lᵀ·B for a t×t L, zero above its diagonal, and a t×n
// B: C[i] = Σ_{j≥i} L[j][i]·B[j].
func (ck CausalKernel) LowerLtB(t, n int, l []uint16, ldl int, b []uint16, ldb int, c []float32, ldc int) {
	o := operands{aT: true, m: t, n: n, k: t, a: l, lda: ldl, b: b, ldb: ldb, c: c, ldc: ldc}
	o.check(blas.Trans, blas.NoTrans, len(l), len(b))
	ck.causal(CausalLtB, o, 0, func(i0, rows int) (d0, d1, cols int) { return i0, t, n })
}

// CausalRowPanel is the row panel of the causal kernel: rows split into
// blocks of a multiple of it get the bits of the whole call (LowerABt).
const CausalRowPanel = dotMR

// causal runs a checked causal product o of kind on ck's path; row r0 of
// the item is o's row 0 (LowerABt's blocks of rows), and span gives the
// depths [d0, d1) and the columns [0, cols) the row panel of rows from
// o's row i0 needs.
func (ck CausalKernel) causal(kind CausalKind, o operands, r0 int, span func(i0, rows int) (d0, d1, cols int)) {
	if o.m == 0 || o.n == 0 {
		return
	}
	s := causalPool.Get().(*causalScratch)
	defer causalPool.Put(s)
	if ck.k == nil {
		ck.widen(kind, o, r0, s)
		return
	}
	kern := ck.k
	mr, nr := kern.mr, kern.nr
	kp := (o.k + kern.step - 1) / kern.step * kern.step
	s.b = grow(s.b, (o.n+nr-1)/nr*kp*nr)
	s.a = grow(s.a, mr*kp)
	s.t = grow(s.t, mr*nr)
	if o.k == 0 {
		clear(s.b)
	} else {
		packB(kern, o, s.b, kp)
	}
	for i0 := 0; i0 < o.m; i0 += mr {
		rows := min(mr, o.m-i0)
		d0, d1, cols := span(i0, rows)
		d1 = min((d1+kern.step-1)/kern.step*kern.step, kp)
		cols = min(cols, o.n)
		p0, pairs := d0/2, (d1-d0)/2
		// A full row panel of a row-major A is read where it is stored
		// when its pairs end within its rows; otherwise A's panel holds
		// the depths [d0, d1) only, op(A) from depth d0 on.
		a, lda := &s.a[0], 0 // A's panel, or A in place
		if kern.inPlace != nil && !o.aT && rows == mr && d1 <= o.k && pairs > 0 {
			a, lda = &o.a[i0*o.lda+d0], o.lda
		} else if pairs > 0 {
			oa := o
			oa.k = min(d1, o.k) - d0
			if o.aT {
				oa.a = o.a[d0*o.lda:]
			} else {
				oa.a = o.a[d0:]
			}
			packA(kern, oa, s.a, d1-d0, i0)
		}
		for j0 := 0; j0 < cols; j0 += nr {
			w := min(nr, o.n-j0)
			if pairs <= 0 { // an empty depth (k = 0): zero sums
				for i := range rows {
					clear(o.c[(i0+i)*o.ldc+j0:][:w])
				}
				continue
			}
			kern.tileC(pairs, a, lda, &s.b[(j0/nr)*kp*nr+p0*2*nr], o, i0, j0, rows, s.t)
		}
	}
}

// widen runs the causal product o on sgemm's float32 products of its
// operands widened (exactly) into s.
func (ck CausalKernel) widen(kind CausalKind, o operands, r0 int, s *causalScratch) {
	na, nb := o.storedLen()
	s.w[0], s.w[1] = grow(s.w[0], na), grow(s.w[1], nb)
	a, b := s.w[0], s.w[1]
	precision.DecodeBF16(a, o.a[:na])
	precision.DecodeBF16(b, o.b[:nb])
	switch kind {
	case CausalABt:
		sgemm.LowerABt(r0, r0+o.m, o.k, a, o.lda, b, o.ldb, o.c, o.ldc)
	case CausalLB:
		sgemm.LowerLB(0, o.m, o.n, a, o.lda, b, o.ldb, o.c, o.ldc)
	case CausalLtB:
		sgemm.LowerLtB(o.m, o.n, a, o.lda, b, o.ldb, o.c, o.ldc)
	}
}

// causalKey is a causal product as calibration tells them apart: its kind
// and its item's size (t×t, and the depth or columns d).
type causalKey struct {
	kind CausalKind
	t, d int
}

// CausalChoice is one causal product's calibration: the time of an item
// on each candidate (the best of the rounds) and the path chosen.
type CausalChoice struct {
	Kind    CausalKind
	T, D    int
	Paths   []string
	Seconds []float64
	Rounds  int
	Path    string
}

// Rate is candidate i's GFLOP/s, counting the multiply-adds of the
// triangle the product needs (T(T+1)/2·D).
func (c CausalChoice) Rate(i int) float64 {
	return float64(c.T) * float64(c.T+1) * float64(c.D) / c.Seconds[i] / 1e9
}

func (c CausalChoice) String() string {
	return fmt.Sprintf("%v %d×%d×%d: %s", c.Kind, c.T, c.T, c.D, c.Path)
}

var causalChoices map[causalKey]*CausalChoice // under pathMu

// CausalFor is the path the causal products of kind take on t×t items of
// depth or width d: forced by SetPath or GPTLAB_BF16 (widen, avx512bf16),
// else calibrated on first use, as Gemm's shapes are (widen kept unless
// the kernel times at least margin faster).
func CausalFor(kind CausalKind, t, d int) CausalKernel {
	initPaths()
	if envErr != nil {
		panic(envErr.Error())
	}
	pathMu.Lock()
	defer pathMu.Unlock()
	dot := slices.IndexFunc(paths, func(p pathImpl) bool { return p.name == "avx512bf16" })
	switch {
	case dot < 0 || forced != nil && forced.kern == nil:
		return CausalKernel{}
	case forced != nil && forced.name == "avx512bf16":
		return CausalKernel{paths[dot].kern}
	}
	key := causalKey{kind, t, d}
	c, ok := causalChoices[key]
	if !ok {
		c = calibrateCausal(key, paths[dot])
		if causalChoices == nil {
			causalChoices = map[causalKey]*CausalChoice{}
		}
		causalChoices[key] = c
	}
	if c.Path == "widen" {
		return CausalKernel{}
	}
	return CausalKernel{paths[dot].kern}
}

// calibrateCausal times key's product on widen and on kern, on an item of
// fixed values with L's upper triangle zero, and returns the choice.
func calibrateCausal(key causalKey, dot pathImpl) *CausalChoice {
	c := &CausalChoice{Kind: key.kind, T: key.t, D: key.d, Paths: []string{"widen", dot.name}}
	t, d := key.t, key.d
	seed := uint32(11)
	val := func() uint16 {
		seed = seed*1664525 + 1013904223
		return precision.ToBF16(float32(int32(seed>>8)-1<<23) / (1 << 23))
	}
	sq, td := make([]uint16, t*max(t, d)), make([]uint16, t*d)
	for i := range t {
		for j := 0; j <= i && j < len(sq)/t; j++ {
			sq[i*max(t, d)+j] = val()
		}
	}
	for i := range td {
		td[i] = val()
	}
	out := make([]float32, t*max(t, d))
	call := func(ck CausalKernel) func() {
		switch key.kind {
		case CausalABt:
			return func() { ck.LowerABt(0, t, d, td, d, td, d, out, t) }
		case CausalLB:
			return func() { ck.LowerLB(t, d, sq, max(t, d), td, d, out, d) }
		}
		return func() { ck.LowerLtB(t, d, sq, max(t, d), td, d, out, d) }
	}
	cands := []pathImpl{{"widen", nil}, dot}
	c.Seconds, c.Rounds = timeRounds(cands, []func(){call(CausalKernel{}), call(CausalKernel{dot.kern})})
	c.Path = cands[fastest(cands, c.Seconds)].name
	return c
}

// CausalChoices lists the causal products calibrated so far, by kind and
// size.
func CausalChoices() []CausalChoice {
	pathMu.Lock()
	defer pathMu.Unlock()
	var cs []CausalChoice
	for _, c := range causalChoices {
		cs = append(cs, *c)
	}
	slices.SortFunc(cs, func(a, b CausalChoice) int {
		if a.Kind != b.Kind {
			return int(a.Kind - b.Kind)
		}
		if a.T != b.T {
			return a.T - b.T
		}
		return a.D - b.D
	})
	return cs
}

// CausalPath says how the causal products run, as the kernels line names
// it: "calibrated: avx512bf16 ×3", a forced path, or "widen" where the
// machine has no VDPBF16PS.
func CausalPath() string {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	dot := slices.ContainsFunc(paths, func(p pathImpl) bool { return p.name == "avx512bf16" })
	switch {
	case !dot:
		return "widen"
	case forced != nil && (forced.kern == nil || forced.name == "avx512bf16"):
		if byEnv {
			return forced.name + " (" + EnvPath + ")"
		}
		return forced.name + " (forced)"
	}
	count := map[string]int{}
	for _, c := range causalChoices {
		count[c.Path]++
	}
	if len(count) == 0 {
		return "calibrated per size on first use among widen, avx512bf16"
	}
	var parts []string
	for _, p := range []string{"avx512bf16", "widen"} {
		if count[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", p, count[p]))
		}
	}
	return "calibrated: " + strings.Join(parts, ", ")
}
