package arena

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
)

// Buf is fixed storage an op reads or writes: float32 or int data and the
// shape it has at that op.
type Buf struct {
	F32   []float32
	Int   []int
	Shape tensor.Shape
}

// Kernel is implemented by ops that can run on fixed storage without
// allocating. Bind is called once, when the arena is laid out; the function
// it returns is called on every run and must write all of out. ok false
// means the op cannot run on these buffers (the executor then calls
// UsePreallocDo).
type Kernel interface {
	BindKernel(out Buf, in []Buf) (run func(), ok bool)
}

// builtinKernels are gorgonia's op types the executor has kernels for.
var builtinKernels = map[string]func(name string, out Buf, in []Buf) (func(), bool){
	"gorgonia.linAlgBinOp":        matMulKernel,
	"gorgonia.elemBinOp":          elemKernel,
	"gorgonia.transposeOp":        transposeKernel,
	"*gorgonia.byIndicesOp":       gatherKernel,
	"*gorgonia.byIndicesOpDiffOp": scatterAddKernel,
}

// hasKernel reports whether bindKernel may find a kernel for op.
func hasKernel(op gorgonia.Op) bool {
	if _, ok := op.(Kernel); ok {
		return true
	}
	_, ok := builtinKernels[reflect.TypeOf(op).String()]
	return ok
}

// bindKernel returns the allocation-free computation of op on fixed
// buffers: the op's own Kernel, or one of the executor's for gorgonia's
// built-in ops that the GPT uses. Each gives bitwise the result of the
// op's Do (the tests compare with the TapeMachine).
func bindKernel(op gorgonia.Op, out Buf, in []Buf) (func(), bool) {
	if k, ok := op.(Kernel); ok {
		return k.BindKernel(out, in)
	}
	if k, ok := builtinKernels[reflect.TypeOf(op).String()]; ok {
		return k(op.String(), out, in)
	}
	return nil, false
}

func allF32(bufs ...Buf) bool {
	for _, b := range bufs {
		if b.F32 == nil || len(b.F32) != b.Shape.TotalSize() {
			return false
		}
	}
	return true
}

// matMulKernel runs gorgonia's Mul/BatchedMatMul ("A ××× Bᵀ" and the like,
// 2-D or 3-D with equal batch) as the same Sgemm calls tensor makes.
func matMulKernel(name string, out Buf, in []Buf) (func(), bool) {
	if len(in) != 2 || !allF32(out, in[0], in[1]) {
		return nil, false
	}
	lhs, rhs, _ := strings.Cut(name, "×")
	tA, tB := strings.Contains(lhs, "ᵀ"), strings.Contains(rhs, "ᵀ")
	a, b := in[0], in[1]
	dims := out.Shape.Dims()
	if dims != a.Shape.Dims() || dims != b.Shape.Dims() || dims < 2 || dims > 3 {
		return nil, false
	}
	batch := 1
	if dims == 3 {
		batch = out.Shape[0]
		if a.Shape[0] != batch || b.Shape[0] != batch {
			return nil, false
		}
	}
	as, bs := a.Shape[dims-2:], b.Shape[dims-2:]
	m, n := out.Shape[dims-2], out.Shape[dims-1]
	k := as[1]
	transA, transB := blas.NoTrans, blas.NoTrans
	lda, ldb := as[1], bs[1]
	if tA {
		k, transA = as[0], blas.Trans
		if as[1] != m {
			return nil, false
		}
	} else if as[0] != m {
		return nil, false
	}
	if tB {
		transB = blas.Trans
		if bs[0] != n || bs[1] != k {
			return nil, false
		}
	} else if bs[0] != k || bs[1] != n {
		return nil, false
	}
	impl := tensor.WhichBLAS()
	sa, sb, sc := m*k, k*n, m*n
	mul := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			impl.Sgemm(transA, transB, m, n, k, 1, a.F32[i*sa:(i+1)*sa], lda, b.F32[i*sb:(i+1)*sb], ldb, 0, out.F32[i*sc:(i+1)*sc], n)
		}
	}
	if batch == 1 || 2*m*n*k >= batchSplitFlops {
		return func() { mul(0, batch) }, true
	}
	// many small products (attention's heads): one Sgemm call per item,
	// the items split over the pool.
	return par.New(batch, sa+sb+sc, mul).Run, true
}

// batchSplitFlops is the size of one product of a batch above which the
// batch runs item after item, each product split by the BLAS itself (as
// gptlab's sgemm does above 4 Mflop).
const batchSplitFlops = 4 << 20

// elemGrain is the elements of one row of an elementwise kernel's split.
const elemGrain = 4096

// elemKernel runs a same-shape elementwise binary op.
func elemKernel(name string, out Buf, in []Buf) (func(), bool) {
	if len(in) != 2 || !allF32(out, in[0], in[1]) || !in[0].Shape.Eq(out.Shape) || !in[1].Shape.Eq(out.Shape) {
		return nil, false
	}
	a, b, c := in[0].F32, in[1].F32, out.F32
	var f func(c, a, b []float32)
	switch strings.Fields(name)[0] {
	case "+":
		f = vec.Add
	case "-":
		f = func(c, a, b []float32) {
			for i := range c {
				c[i] = a[i] - b[i]
			}
		}
	case "⊙":
		f = func(c, a, b []float32) {
			for i := range c {
				c[i] = a[i] * b[i]
			}
		}
	case "÷":
		f = func(c, a, b []float32) {
			for i := range c {
				c[i] = a[i] / b[i]
			}
		}
	default:
		return nil, false
	}
	n := len(c)
	return par.New((n+elemGrain-1)/elemGrain, 3*elemGrain, func(lo, hi int) {
		lo, hi = lo*elemGrain, min(hi*elemGrain, n)
		f(c[lo:hi], a[lo:hi], b[lo:hi])
	}).Run, true
}

// transposeKernel permutes the axes of a contiguous tensor: "Aᵀ{0, 2, 1, 3}".
func transposeKernel(name string, out Buf, in []Buf) (func(), bool) {
	if len(in) != 1 || !allF32(out, in[0]) {
		return nil, false
	}
	perm, err := parseInts(name)
	src := in[0].Shape
	if err != nil || len(perm) != src.Dims() || len(perm) == 0 {
		return nil, false
	}
	for i, p := range perm {
		if p < 0 || p >= len(perm) || out.Shape[i] != src[p] {
			return nil, false
		}
	}
	// stride[i]: the step in the source for one step along output axis i.
	srcStrides := make([]int, src.Dims())
	s := 1
	for i := src.Dims() - 1; i >= 0; i-- {
		srcStrides[i] = s
		s *= src[i]
	}
	stride := make([]int, len(perm))
	for i, p := range perm {
		stride[i] = srcStrides[p]
	}
	shape := []int(out.Shape)
	x, y := in[0].F32, out.F32
	if len(shape) == 4 {
		d0, d1, d2, d3 := shape[0], shape[1], shape[2], shape[3]
		s0, s1, s2, s3 := stride[0], stride[1], stride[2], stride[3]
		return func() {
			o := 0
			for i := 0; i < d0; i++ {
				for j := 0; j < d1; j++ {
					for k := 0; k < d2; k++ {
						base := i*s0 + j*s1 + k*s2
						for l := 0; l < d3; l++ {
							y[o] = x[base+l*s3]
							o++
						}
					}
				}
			}
		}, true
	}
	idx := make([]int, len(shape))
	return func() {
		clear(idx)
		off := 0
		for o := range y {
			y[o] = x[off]
			for ax := len(shape) - 1; ax >= 0; ax-- {
				idx[ax]++
				off += stride[ax]
				if idx[ax] < shape[ax] {
					break
				}
				off -= stride[ax] * shape[ax]
				idx[ax] = 0
			}
		}
	}, true
}

func parseInts(s string) ([]int, error) {
	i, j := strings.IndexByte(s, '{'), strings.LastIndexByte(s, '}')
	if i < 0 || j < i {
		return nil, fmt.Errorf("no {…} in %q", s)
	}
	var out []int
	for _, f := range strings.Split(s[i+1:j], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// gatherKernel is ByIndices along axis 0: out[i, :] = x[idx[i], :].
func gatherKernel(name string, out Buf, in []Buf) (func(), bool) {
	if name != "ByIndicesOp{axis=0}" || len(in) != 2 || !allF32(out, in[0]) || in[1].Int == nil {
		return nil, false
	}
	x, idx, y := in[0], in[1].Int, out.F32
	if x.Shape.Dims() != 2 || out.Shape.Dims() != 2 || out.Shape[0] != len(idx) || out.Shape[1] != x.Shape[1] {
		return nil, false
	}
	rows, c := x.Shape[0], x.Shape[1]
	return func() {
		for i, r := range idx {
			if r < 0 || r >= rows {
				panic(fmt.Sprintf("arena: index %d out of range [0, %d)", r, rows))
			}
			copy(y[i*c:(i+1)*c], x.F32[r*c:(r+1)*c])
		}
	}, true
}

// scatterAddKernel is ByIndices' gradient along axis 0: out is zero but
// for out[idx[i], :] += grad[i, :], added in the order of i as tensor does.
func scatterAddKernel(name string, out Buf, in []Buf) (func(), bool) {
	if !strings.HasSuffix(name, "(0)") || len(in) != 3 || !allF32(out, in[1]) || in[2].Int == nil {
		return nil, false
	}
	g, idx, y := in[1].F32, in[2].Int, out.F32
	if out.Shape.Dims() != 2 || in[1].Shape.Dims() != 2 || in[1].Shape[0] != len(idx) || in[1].Shape[1] != out.Shape[1] {
		return nil, false
	}
	rows, c := out.Shape[0], out.Shape[1]
	return func() {
		clear(y)
		for i, r := range idx {
			if r < 0 || r >= rows {
				panic(fmt.Sprintf("arena: index %d out of range [0, %d)", r, rows))
			}
			dst, src := y[r*c:(r+1)*c], g[i*c:(i+1)*c]
			for j := range dst {
				dst[j] += src[j]
			}
		}
	}, true
}
