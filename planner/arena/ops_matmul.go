package arena

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
)

// MatMulOp is C = op(A)·op(B), op a transpose when TransA or TransB says
// so, on 2-D operands or a batch of them (3-D with equal batch size): A
// (M, K) or, transposed, (K, M); B (K, N) or (N, K); C (M, N). A linear
// layer reads its [out, in] weight as B with TransB, so no transposed copy
// is ever made. float32 runs the process's BLAS (gorgonia/tensor's
// WhichBLAS: gptlab's sgemm by default), one Sgemm per batch item (small
// items split over the worker pool); float64 a plain triple loop, the
// reference.
type MatMulOp struct {
	opBase
	TransA, TransB bool
}

// MatMul is the node op(a)·op(b) (see MatMulOp).
func MatMul(a, b *gorgonia.Node, transA, transB bool) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(MatMulOp{TransA: transA, TransB: transB}, a, b)
}

// Name is the op's kind.
func (MatMulOp) Name() string { return "MatMul" }

// String names the op with its transposes: "A×Bᵀ".
func (op MatMulOp) String() string {
	s := "A"
	if op.TransA {
		s += "ᵀ"
	}
	s += "×B"
	if op.TransB {
		s += "ᵀ"
	}
	return s
}

func (MatMulOp) Arity() int { return 2 }
func (MatMulOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a, a)
}

// dims are the batch and matrix sizes of a product of shapes a and b.
func (op MatMulOp) dims(a, b tensor.Shape) (batch, m, n, k int, err error) {
	d := a.Dims()
	if d != b.Dims() || d < 2 || d > 3 {
		return 0, 0, 0, 0, fmt.Errorf("%v: shapes %v and %v, want two matrices or two batches of them", op, a, b)
	}
	batch = 1
	if d == 3 {
		if a[0] != b[0] {
			return 0, 0, 0, 0, fmt.Errorf("%v: batches of %d and %d", op, a[0], b[0])
		}
		batch = a[0]
	}
	as, bs := a[d-2:], b[d-2:]
	m, k = as[0], as[1]
	if op.TransA {
		m, k = k, m
	}
	kb, n := bs[0], bs[1]
	if op.TransB {
		kb, n = n, kb
	}
	if kb != k {
		return 0, 0, 0, 0, fmt.Errorf("%v: shapes %v and %v: inner sizes %d and %d differ", op, a, b, k, kb)
	}
	return batch, m, n, k, nil
}

func (op MatMulOp) outShape(in []tensor.Shape) (tensor.Shape, error) {
	batch, m, n, _, err := op.dims(in[0], in[1])
	if err != nil {
		return nil, err
	}
	if in[0].Dims() == 3 {
		return tensor.Shape{batch, m, n}, nil
	}
	return tensor.Shape{m, n}, nil
}

func (op MatMulOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return op.outShape(shapesOf(in))
}

func (op MatMulOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) { return runFloat(op, nil, in, 2) }

func (op MatMulOp) UsePreallocDo(out gorgonia.Value, in ...gorgonia.Value) (gorgonia.Value, error) {
	return runFloat(op, out, in, 2)
}

// BindKernel implements Kernel.
func (op MatMulOp) BindKernel(out Buf, in []Buf) (func(), bool) { return bindKernel(op, out, in) }

func (op MatMulOp) bind(out Buf, in []Buf) (func(), error) {
	_, err := checkShaped(op, out, in, out.Dtype, out.Dtype, out.Dtype)
	if err != nil {
		return nil, err
	}
	batch, m, n, k, _ := op.dims(in[0].Shape, in[1].Shape)
	lda, ldb := k, n
	if op.TransA {
		lda = m
	}
	if op.TransB {
		ldb = k
	}
	sa, sb, sc := m*k, k*n, m*n
	switch out.Dtype {
	case F64:
		a, b, c := in[0].F64, in[1].F64, out.F64
		return func() {
			for i := 0; i < batch; i++ {
				op.naive(m, n, k, a[i*sa:(i+1)*sa], lda, b[i*sb:(i+1)*sb], ldb, c[i*sc:(i+1)*sc])
			}
		}, nil
	case F32:
	default:
		return nil, fmt.Errorf("%v: dtype %v, want f32 or f64", op, out.Dtype)
	}
	a, b, c := in[0].F32, in[1].F32, out.F32
	impl := tensor.WhichBLAS()
	transA, transB := blas.NoTrans, blas.NoTrans
	if op.TransA {
		transA = blas.Trans
	}
	if op.TransB {
		transB = blas.Trans
	}
	mul := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			impl.Sgemm(transA, transB, m, n, k, 1, a[i*sa:(i+1)*sa], lda, b[i*sb:(i+1)*sb], ldb, 0, c[i*sc:(i+1)*sc], n)
		}
	}
	if batch == 1 || 2*m*n*k >= batchSplitFlops {
		return func() { mul(0, batch) }, nil
	}
	// many small products (attention's heads): one Sgemm call per item,
	// the items split over the pool.
	return par.New(batch, sa+sb+sc, mul).Run, nil
}

// naive is one product in float64, summing over k in order: the reference.
func (op MatMulOp) naive(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64) {
	at := func(i, p int) float64 {
		if op.TransA {
			return a[p*lda+i]
		}
		return a[i*lda+p]
	}
	bt := func(p, j int) float64 {
		if op.TransB {
			return b[j*ldb+p]
		}
		return b[p*ldb+j]
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			s := 0.0
			for p := 0; p < k; p++ {
				s += at(i, p) * bt(p, j)
			}
			c[i*n+j] = s
		}
	}
}

// batchSplitFlops is the size of one product of a batch above which the
// batch runs item after item, each product split by the BLAS itself (as
// gptlab's sgemm does above 4 Mflop).
const batchSplitFlops = 4 << 20

func (op MatMulOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op MatMulOp) Hashcode() uint32      { return hashString(op.String()) }

func (MatMulOp) DiffWRT(int) []bool { return []bool{true, true} }

// SymDiff: the gradients of MatMulGrads, as MatMul products.
func (op MatMulOp) SymDiff(in gorgonia.Nodes, out, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	return MatMulGrads(in[0], in[1], grad, op.TransA, op.TransB, MatMul)
}

// MatMulGrads are the gradients of C = op(a)·op(b) given grad = dC, as the
// products mul makes (MatMul, or another product with its contract): for
// C = A·B, dA = dC·Bᵀ and dB = Aᵀ·dC; each transpose of the forward moves
// into the backward products' flags, so no transposed copy is made:
//
//	C = A·B:   dA = dC·Bᵀ   dB = Aᵀ·dC
//	C = Aᵀ·B:  dA = B·dCᵀ   dB = A·dC
//	C = A·Bᵀ:  dA = dC·B    dB = dCᵀ·A
//	C = Aᵀ·Bᵀ: dA = Bᵀ·dCᵀ  dB = dCᵀ·Aᵀ
func MatMulGrads(a, b, grad *gorgonia.Node, transA, transB bool, mul func(x, y *gorgonia.Node, tx, ty bool) (*gorgonia.Node, error)) (gorgonia.Nodes, error) {
	type prod struct {
		x, y   *gorgonia.Node
		tx, ty bool
	}
	var da, db prod
	switch {
	case !transA && !transB:
		da, db = prod{grad, b, false, true}, prod{a, grad, true, false}
	case transA && !transB:
		da, db = prod{b, grad, false, true}, prod{a, grad, false, false}
	case !transA && transB:
		da, db = prod{grad, b, false, false}, prod{grad, a, true, false}
	default:
		da, db = prod{b, grad, true, true}, prod{grad, a, true, true}
	}
	ga, err := mul(da.x, da.y, da.tx, da.ty)
	if err != nil {
		return nil, err
	}
	gb, err := mul(db.x, db.y, db.tx, db.ty)
	if err != nil {
		return nil, err
	}
	return gorgonia.Nodes{ga, gb}, nil
}
