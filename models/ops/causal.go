package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/sgemm"
	"gptlab/planner/arena"
)

// Causal attention's products touch a lower triangle: the scores q·kᵀ are
// read by the causal softmax on and below the diagonal only, and the
// probabilities p that multiply v are zero above it. These ops compute
// only what is needed, for every item of a batch (B*H heads): on gptlab's
// sgemm with its causal products, which stop each row panel of a few rows
// at the diagonal; on another BLAS by blocks of causalRows rows, each an
// Sgemm call. A lower-triangular l must be zero above its diagonal (the
// sgemm products read the zeros of each row panel's diagonal block in
// place): the scores and probabilities these ops write are (+0, as the
// causal softmax's gradient and the dropout of probabilities are), so
// every l of the attention is:
//
//	CausalScores(a, b)  = a·bᵀ on and below the diagonal, zero above: (N, T, d), (N, T, d) -> (N, T, T)
//	CausalApply(l, m)   = l·m with l lower triangular:                 (N, T, T), (N, T, d) -> (N, T, d)
//	causalApplyT(l, m)  = lᵀ·m with l lower triangular:                (N, T, T), (N, T, d) -> (N, T, d)
//
// about half the work of the full products (and of arena.MatMul).
//
//	CausalProbs(q, k)   = CausalSoftmax(CausalScores(q, k)), fused:    (N, T, d), (N, T, d) -> (N, T, T)
//
// computes each block of scores and its rows' softmax while the block is
// still in cache, never writing the whole (N, T, T) scores to memory and
// reading them back: the same bits as the two ops (the same products by
// the same blocks, then the same row softmax), in less time than the two
// (BenchmarkCausalProbs, the long shape on sgemm: 2.8 against 3.4 ms on
// a 2-vCPU EPYC; a third less before sgemm's causal products). CausalAttend
// (causalattend.go) goes one op further for a core nothing keeps: the
// probabilities, their dropout and their product with v, by the same
// blocks, without writing the probabilities at all. Their
// gradients are each other: for s = CausalScores(q, k), dq = CausalApply(ds,
// k) and dk = causalApplyT(ds, q) (ds is lower triangular too); for y =
// CausalApply(p, v), dp = CausalScores(dy, v) (only its lower triangle is
// read) and dv = causalApplyT(p, dy).
//
// causalRows is a multiple of every sgemm kernel's row panel, so that
// CausalAttend's blocks of rows get CausalApply's bits.
const causalRows = 4 * sgemm.MaxRowPanel

// CausalScores is a·bᵀ on and below the diagonal of each (T, T) item.
func CausalScores(a, b *G.Node, opts ...CausalOption) (*G.Node, error) {
	return G.ApplyOp(causalOp{kind: causalScores}.with(opts), a, b)
}

// CausalProbs is CausalSoftmax(CausalScores(q, k), scale), fused (see
// causalRows); scale must be positive. Its gradient is that of the two
// ops: ds = CausalSoftmaxGrad(p, dp), then dq = CausalApply(ds, k) and
// dk = causalApplyT(ds, q).
func CausalProbs(q, k *G.Node, scale float64, opts ...CausalOption) (*G.Node, error) {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return nil, fmt.Errorf("CausalProbs: scale %v, want a positive finite number", scale)
	}
	return G.ApplyOp(causalOp{kind: causalProbs, scale: scale}.with(opts), q, k)
}

// CausalApply is l·m for lower-triangular items l, zero above the
// diagonal. Its gradient with respect to l is the lower triangle only (the
// upper entries are not variables: they are zero by construction, as a
// causal softmax's are).
func CausalApply(l, m *G.Node, opts ...CausalOption) (*G.Node, error) {
	return G.ApplyOp(causalOp{kind: causalApply}.with(opts), l, m)
}

// with is op with the options opts applied.
func (op causalOp) with(opts []CausalOption) causalOp {
	for _, o := range opts {
		o(&op)
	}
	return op
}

type causalKind int

const (
	causalScores causalKind = iota
	causalApply
	causalApplyT
	causalProbs // causalScores, then the causal softmax of scale times each row
)

// scores reports whether the op's output is (N, T, T) from a·bᵀ.
func (k causalKind) scores() bool { return k == causalScores || k == causalProbs }

type causalOp struct {
	opBase
	kind  causalKind
	scale float64 // causalProbs: the softmax's scale
	heads heads   // how the (T, d) operands are laid out
	bf16  bool    // multiply on bf16 operands (BF16Products)
	// grad16 is the 16-bit type CausalProbs rounds its scores' gradient
	// to (GradientsIn), or 0: not rounded.
	grad16 arena.Dtype
}

func (op causalOp) Arity() int { return 2 }
func (op causalOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.heads.H == 0 {
		return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a))
	}
	if op.kind.scores() { // (B*T, C) twice -> (B*H, T, T)
		return hm.NewFnType(tt(2, a), tt(2, a), tt(3, a))
	}
	return hm.NewFnType(tt(3, a), tt(2, a), tt(2, a)) // (B*H, T, T), (B*T, C) -> (B*T, C)
}

func (op causalOp) check(in []tensor.Shape) (tensor.Shape, error) {
	x, y := in[0], in[1]
	if op.heads.H > 0 {
		return op.heads.check(op, op.kind.scores(), x, y)
	}
	if x.Dims() != 3 || y.Dims() != 3 || x[0] != y[0] || x[1] != y[1] {
		return nil, fmt.Errorf("%v: shapes %v and %v, want (N, T, ·) and (N, T, ·)", op, x, y)
	}
	if op.kind.scores() {
		if x[2] != y[2] {
			return nil, fmt.Errorf("%v: shapes %v and %v, want (N, T, d) twice", op, x, y)
		}
		return tensor.Shape{x[0], x[1], x[1]}, nil
	}
	if x[2] != x[1] {
		return nil, fmt.Errorf("%v: shapes %v and %v, want (N, T, T) and (N, T, d)", op, x, y)
	}
	return y.Clone(), nil
}

// dims returns the items N of checked input shapes in, their length T, and
// the width d of their (T, d) operands (a scores product's depth).
func (op causalOp) dims(in []tensor.Shape) (N, T, d int) {
	if op.kind.scores() {
		return op.heads.dims(in[0])
	}
	_, _, d = op.heads.dims(in[1])
	return in[0][0], in[0][1], d
}

func (op causalOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) { return op.check(shapesOf(in)) }
func (op causalOp) Do(in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(tensor.New(tensor.WithShape(s...), tensor.Of(readDtype(in[1]))), in...)
}
func (op causalOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	if in[0].Dtype() == tensor.Uint16 || in[1].Dtype() == tensor.Uint16 { // bf16 bits (ReadsBF16)
		o, err := checkPrealloc(op.String(), out, s, tensor.Float32)
		if err != nil {
			return nil, err
		}
		return runReadingBF16(op, op.String(), o, in)
	}
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	if y, ok := o.Data().([]float64); ok {
		N, T, d := op.dims(valueShapes(in))
		op.reference(y, in[0].Data().([]float64), in[1].Data().([]float64), N, T, d)
		return o, nil
	}
	return runFloat32(op, op.String(), o, in)
}

// BindKernel implements arena.Kernel.
func (op causalOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op causalOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBindReading16(op, out, in); err != nil {
		return nil, err
	}
	N, T, d := op.dims(shapesOfBufs(in))
	if op.bf16 {
		return op.bind16(out, in, N, T, d)
	}
	z := out.F32
	r := newCausalReader(op, T, d, in)
	per := r.scratch(true)
	var split *par.Split
	var wide []float32 // each chunk's widened bf16 operands
	each := func(f func(o causalItem[float32], i int)) func() {
		split = par.New(N, causalItemSize(op, T, d), func(lo, hi int) {
			c := chunkOf(r, wide[split.ChunkOf(lo)*per:][:per])
			for i := lo; i < hi; i++ {
				f(c.item(i, z), i)
			}
		})
		wide = make([]float32, split.Chunks()*per)
		return split.Run
	}
	impl := tensor.WhichBLAS()
	if causalOnSgemm(impl) {
		return each(func(o causalItem[float32], _ int) { lowerItem(op, T, d, o, causalProducts[float32](sgemmCausal{})) }), nil
	}
	// tris[i] is item i's copy of a diagonal block with its upper part
	// zeroed, so that l's entries above the diagonal are never read (the
	// products are exact for any l, not just one that is triangular).
	tris := make([]float32, N*causalRows*causalRows)
	return each(func(o causalItem[float32], i int) {
		tri := tris[i*causalRows*causalRows : (i+1)*causalRows*causalRows]
		a, b, c := o.a, o.b, o.c
		for r0 := 0; r0 < T; r0 += causalRows {
			r1 := min(r0+causalRows, T)
			w := r1 - r0
			if !op.kind.scores() {
				for i := range w { // the diagonal block of l, lower triangle only
					row := tri[i*w : (i+1)*w]
					copy(row[:i+1], a[(r0+i)*T+r0:(r0+i)*T+r0+i+1])
					clear(row[i+1:])
				}
			}
			switch op.kind {
			case causalScores, causalProbs:
				// rows r0..r1 of a·bᵀ up to column r1
				impl.Sgemm(blas.NoTrans, blas.Trans, w, r1, d, 1, a[r0*o.lda:], o.lda, b, o.ldb, 0, c[r0*T:], T)
				op.finishRows(c, T, r0, r1)
			case causalApply: // rows r0..r1 of l·m: l's columns before r0, then its diagonal block
				beta := float32(0)
				if r0 > 0 {
					impl.Sgemm(blas.NoTrans, blas.NoTrans, w, d, r0, 1, a[r0*T:], T, b, o.ldb, 0, c[r0*o.ldc:], o.ldc)
					beta = 1
				}
				impl.Sgemm(blas.NoTrans, blas.NoTrans, w, d, w, 1, tri, w, b[r0*o.ldb:], o.ldb, beta, c[r0*o.ldc:], o.ldc)
			case causalApplyT: // rows r0..r1 of lᵀ·m: l's diagonal block, then its rows from r1 on
				impl.Sgemm(blas.Trans, blas.NoTrans, w, d, w, 1, tri, w, b[r0*o.ldb:], o.ldb, 0, c[r0*o.ldc:], o.ldc)
				if r1 < T {
					impl.Sgemm(blas.Trans, blas.NoTrans, w, d, T-r1, 1, a[r1*T+r0:], T, b[r1*o.ldb:], o.ldb, 1, c[r0*o.ldc:], o.ldc)
				}
			}
		}
	}), nil
}

// causalItem is one item's operands a, b (as E: float32, or bf16 bits)
// and the output c, each from its first element, with their row strides:
// a is (T, d) for scores, (T, T) otherwise; b is (T, d); c is (T, T) for
// scores, (T, d) otherwise.
type causalItem[E uint16 | float32] struct {
	a, b          []E
	c             []float32
	lda, ldb, ldc int
}

// causalItemSize is one item's elements, inputs and output, for the split.
func causalItemSize(op causalOp, T, d int) int {
	if op.kind.scores() {
		return 2*T*d + T*T
	}
	return T*T + 2*T*d
}

// causalOnSgemm reports whether impl is gptlab's sgemm, whose causal
// products (sgemm.LowerABt, LowerLB, LowerLtB) stop each row panel at the
// diagonal; any other BLAS gets the products by blocks of causalRows rows.
func causalOnSgemm(impl tensor.BLAS) bool {
	_, ok := impl.(sgemm.Implementation)
	return ok
}

// causalProducts are the three causal products on operands of type E:
// sgemm's float32 ones (sgemmCausal), or bf16gemm's on bf16 bits.
type causalProducts[E uint16 | float32] interface {
	LowerABt(r0, r1, k int, a []E, lda int, b []E, ldb int, c []float32, ldc int)
	LowerLB(t, n int, l []E, ldl int, b []E, ldb int, c []float32, ldc int)
	LowerLtB(t, n int, l []E, ldl int, b []E, ldb int, c []float32, ldc int)
}

// sgemmCausal is sgemm's causal products as causalProducts.
type sgemmCausal struct{}

func (sgemmCausal) LowerABt(r0, r1, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	sgemm.LowerABt(r0, r1, k, a, lda, b, ldb, c, ldc)
}
func (sgemmCausal) LowerLB(t, n int, l []float32, ldl int, b []float32, ldb int, c []float32, ldc int) {
	sgemm.LowerLB(0, t, n, l, ldl, b, ldb, c, ldc)
}
func (sgemmCausal) LowerLtB(t, n int, l []float32, ldl int, b []float32, ldb int, c []float32, ldc int) {
	sgemm.LowerLtB(t, n, l, ldl, b, ldb, c, ldc)
}

// lowerItem computes one (T, T) item's product on the causal products p;
// scores and probabilities by blocks of causalRows rows, each finished
// (zeroed above the diagonal, or its rows' softmax) while in cache.
func lowerItem[E uint16 | float32](op causalOp, T, d int, o causalItem[E], p causalProducts[E]) {
	switch op.kind {
	case causalScores, causalProbs:
		for r0 := 0; r0 < T; r0 += causalRows {
			r1 := min(r0+causalRows, T)
			p.LowerABt(r0, r1, d, o.a[r0*o.lda:], o.lda, o.b, o.ldb, o.c[r0*T:], T)
			op.finishRows(o.c, T, r0, r1)
		}
	case causalApply:
		p.LowerLB(T, d, o.a, o.lda, o.b, o.ldb, o.c, o.ldc)
	case causalApplyT:
		p.LowerLtB(T, d, o.a, o.lda, o.b, o.ldb, o.c, o.ldc)
	}
}

// finishRows makes rows r0..r1 of a (T, T) item's scores c final: zero
// above the diagonal (scores), or each row's softmax (probabilities).
func (op causalOp) finishRows(c []float32, T, r0, r1 int) {
	for i := r0; i < r1; i++ {
		if op.kind == causalProbs {
			softmaxPrefix32(c[i*T:(i+1)*T], c[i*T:(i+1)*T], i+1, float32(op.scale))
		} else {
			clear(c[i*T+i+1 : (i+1)*T])
		}
	}
}

// reference is the float64 product by its definition, in full, of N
// items of length T and width d.
func (op causalOp) reference(z, x, y []float64, N, T, d int) {
	for n := range N {
		b, ldb := mat(op.heads, y, n, T, d)
		if op.kind.scores() {
			a, lda := mat(op.heads, x, n, T, d)
			c := z[n*T*T : (n+1)*T*T]
			for i := range T {
				for j := range T {
					s := 0.0
					for k := 0; j <= i && k < d; k++ {
						s += a[i*lda+k] * b[j*ldb+k]
					}
					c[i*T+j] = s
				}
			}
			continue
		}
		l := x[n*T*T : (n+1)*T*T]
		c, ldc := mat(op.heads, z, n, T, d)
		for i := range T {
			for j := range d {
				s := 0.0
				if op.kind == causalApply {
					for k := 0; k <= i; k++ {
						s += l[i*T+k] * b[k*ldb+j]
					}
				} else {
					for k := i; k < T; k++ {
						s += l[k*T+i] * b[k*ldb+j]
					}
				}
				c[i*ldc+j] = s
			}
		}
	}
	if op.kind == causalProbs {
		causalSoftmaxForward(z, z, T, 0, op.scale)
	}
}

func (op causalOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op causalOp) Hashcode() uint32      { return hashOf(op) }
func (op causalOp) String() string {
	s := [...]string{"CausalScores", "CausalApply", "CausalApplyT"}[min(op.kind, causalApplyT)] + op.heads.String()
	if op.kind == causalProbs {
		s = fmt.Sprintf("CausalProbs{%v}%v", op.scale, op.heads)
	}
	if op.bf16 {
		s += "{bf16}"
	}
	if op.grad16 != 0 && op.kind == causalProbs {
		s += fmt.Sprintf("{grads %v}", op.grad16)
	}
	return s
}
func (op causalOp) DiffWRT(n int) []bool {
	return []bool{op.kind != causalApplyT, op.kind != causalApplyT}
}

// SymDiff: see the comment at causalRows.
func (op causalOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	apply := func(kind causalKind, a, b *G.Node) (*G.Node, error) {
		return G.ApplyOp(causalOp{kind: kind, heads: op.heads, bf16: op.bf16}, a, b)
	}
	var d0, d1 *G.Node
	var err error
	switch op.kind {
	case causalProbs: // through the softmax's gradient, then as causalScores
		ds, err := G.ApplyOp(causalSoftmaxOp{scale: op.scale, grad: true}, out, grad)
		if err == nil && op.grad16 != 0 { // the scores' gradient, rounded as a stored value's
			if ds, err = arena.Cast(ds, arena.F32, op.grad16); err == nil {
				ds, err = arena.Cast(ds, op.grad16, arena.F32)
			}
		}
		if err != nil {
			return nil, err
		}
		return causalOp{kind: causalScores, heads: op.heads, bf16: op.bf16}.SymDiff(in, nil, ds)
	case causalScores:
		if d0, err = apply(causalApply, grad, in[1]); err == nil {
			d1, err = apply(causalApplyT, grad, in[0])
		}
	case causalApply:
		if d0, err = apply(causalScores, grad, in[1]); err == nil {
			d1, err = apply(causalApplyT, in[0], grad)
		}
	default:
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	return G.Nodes{d0, d1}, err
}

// FlopCounter is an op whose work is not one operation per output
// element: Flops is its floating-point operations on inputs of the given
// shapes. The causal products implement it.
type FlopCounter interface {
	Flops(in []tensor.Shape) float64
}

// Flops is 2·d per multiply-add on and below each item's diagonal, the
// T(T+1)/2 entries of the triangle the product needs: about half a full
// product. (sgemm's causal products compute a little more, to the end of
// each row panel; the blocks of causalRows on another BLAS more again.)
func (op causalOp) Flops(in []tensor.Shape) float64 {
	N, T, d := op.dims(in)
	work := float64(T) * float64(T+1) / 2
	f := 2 * float64(N) * work * float64(d)
	if op.kind == causalProbs {
		f += float64(N * T * T) // the softmax: one per element, as for CausalSoftmax
	}
	return f
}
