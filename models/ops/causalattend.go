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
	"gptlab/internal/vec"
	"gptlab/planner/arena"
)

// CausalAttend is one attention's core end to end: CausalApply(Masked(
// CausalProbs(q, k, scale), mask), v), or without the mask (nil)
// CausalApply(CausalProbs(q, k, scale), v), in one pass that never writes
// the (N, T, T) probabilities to memory. Each block of causalRows query
// rows is scored, softmaxed, masked and multiplied by v while it sits in a
// scratch of its own: the same products by the same blocks as the three
// ops, so the same bits (TestCausalAttend).
//
// It is the forward of a core whose probabilities nothing keeps (a
// selective recomputation rebuilds them for the backward), so it has no
// gradient of its own: the caller differentiates the three ops it stands
// for instead.
//
//	q, k (N, T, d), v (N, T, dv), mask (N, T, T) -> (N, T, dv)
func CausalAttend(q, k, v, mask *G.Node, scale float64) (*G.Node, error) {
	return causalAttend(q, k, v, mask, scale, heads{})
}

// CausalAttendHeads is CausalAttend with q, k, v and the output as H heads
// in place (causalheads.go): q, k (B*T, C), v (B*T, Cv), mask (B*H, T, T)
// -> (B*T, Cv).
func CausalAttendHeads(q, k, v, mask *G.Node, T, H int, scale float64) (*G.Node, error) {
	if err := checkHeads("CausalAttendHeads", T, H); err != nil {
		return nil, err
	}
	return causalAttend(q, k, v, mask, scale, heads{H: H, T: T})
}

// CausalAttendHeadsDropout is CausalAttendHeads with the probabilities'
// dropout drawn in the kernel, as Dropout(probs, s) draws it over the
// (B*H, T, T) probabilities, instead of read from a mask input: the same
// products, so the same bits as CausalAttendHeads with DropoutMask's mask.
func CausalAttendHeadsDropout(q, k, v *G.Node, s DropoutSite, T, H int, scale float64) (*G.Node, error) {
	if err := checkHeads("CausalAttendHeadsDropout", T, H); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	return G.ApplyOp(causalAttendOp{scale: scale, drop: &s, heads: heads{H: H, T: T}}, q, k, v)
}

func checkScale(scale float64) error {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return fmt.Errorf("CausalAttend: scale %v, want a positive finite number", scale)
	}
	return nil
}

func causalAttend(q, k, v, mask *G.Node, scale float64, l heads) (*G.Node, error) {
	if err := checkScale(scale); err != nil {
		return nil, err
	}
	if mask == nil {
		return G.ApplyOp(causalAttendOp{scale: scale, heads: l}, q, k, v)
	}
	return G.ApplyOp(causalAttendOp{scale: scale, masked: true, heads: l}, q, k, v, mask)
}

type causalAttendOp struct {
	opBase
	scale  float64
	masked bool         // a mask input (N, T, T) after v
	drop   *DropoutSite // or the mask drawn in the kernel (nil: neither)
	heads  heads        // how q, k, v and the output are laid out
}

func (op causalAttendOp) Arity() int {
	if op.masked {
		return 4
	}
	return 3
}

func (op causalAttendOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	ts := make([]hm.Type, op.Arity()+1)
	for i := range ts {
		ts[i] = tt(3, a)
		if op.heads.H > 0 && (i != 3 || !op.masked) { // q, k, v and the output; a mask is (B*H, T, T)
			ts[i] = tt(2, a)
		}
	}
	return hm.NewFnType(ts...)
}

func (op causalAttendOp) check(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	q, k, v := in[0], in[1], in[2]
	if op.heads.H > 0 {
		if !op.heads.ok(q) || !q.Eq(k) || !op.heads.ok(v) || v[0] != q[0] {
			return nil, fmt.Errorf("%v: shapes %v, %v and %v, want (B*T, C) twice and (B*T, Cv), T = %d, C and Cv multiples of %d", op, q, k, v, op.heads.T, op.heads.H)
		}
		N, T, _ := op.heads.dims(q)
		if op.masked && !in[3].Eq(tensor.Shape{N, T, T}) {
			return nil, fmt.Errorf("%v: mask %v, want (B*H, T, T) = %v", op, in[3], tensor.Shape{N, T, T})
		}
		return v.Clone(), nil
	}
	if q.Dims() != 3 || !q.Eq(k) || v.Dims() != 3 || v[0] != q[0] || v[1] != q[1] {
		return nil, fmt.Errorf("%v: shapes %v, %v and %v, want (N, T, d) twice and (N, T, dv)", op, q, k, v)
	}
	if op.masked {
		if m := in[3]; !m.Eq(tensor.Shape{q[0], q[1], q[1]}) {
			return nil, fmt.Errorf("%v: mask %v, want (N, T, T) = %v", op, m, tensor.Shape{q[0], q[1], q[1]})
		}
	}
	return v.Clone(), nil
}

func (op causalAttendOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}

func (op causalAttendOp) Do(in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	return op.UsePreallocDo(newLike(in[0], s), in...)
}

func (op causalAttendOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	if y, ok := o.Data().([]float64); ok {
		op.reference(y, in)
		return o, nil
	}
	return runFloat32(op, op.String(), o, in)
}

// reference is the three ops' float64 references, one after the other.
func (op causalAttendOp) reference(y []float64, in []G.Value) {
	N, T, d := op.heads.dims(in[0].Shape())
	_, _, dv := op.heads.dims(in[2].Shape())
	p := make([]float64, N*T*T)
	causalOp{kind: causalProbs, scale: op.scale, heads: op.heads}.reference(p, in[0].Data().([]float64), in[1].Data().([]float64), N, T, d)
	if op.masked {
		for i, m := range in[3].Data().([]float64) {
			p[i] *= m
		}
	}
	if s := op.drop; s != nil {
		m := make([]float32, len(p))
		DropoutMask(m, s.P, s.Key.Seed, s.Key.Step, s.Layer, s.Site)
		for i, v := range m {
			p[i] *= float64(v)
		}
	}
	causalOp{kind: causalApply, heads: op.heads}.reference(y, p, in[2].Data().([]float64), N, T, dv)
}

// BindKernel implements arena.Kernel.
func (op causalAttendOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// bind is causalOp's bind for causalProbs, the mask's product and
// causalOp's for causalApply, fused by row block: the probabilities of
// rows r0..r1 (up to column r1, all CausalApply reads of them) go to the
// chunk's scratch, laid out as the (T, T) item's rows would be, so every
// Sgemm is called with the arguments the separate ops call it with.
func (op causalAttendOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBind(op, out, in); err != nil {
		return nil, err
	}
	N, T, d := op.heads.dims(in[0].Shape)
	_, _, dv := op.heads.dims(in[2].Shape)
	q, k, v, y := in[0].F32, in[1].F32, in[2].F32, out.F32
	var mask []float32
	if op.masked {
		mask = in[3].F32
	}
	impl := tensor.WhichBLAS()
	onSgemm := causalOnSgemm(impl)
	sc := float32(op.scale)
	item := func(i int, s, tri []float32) {
		qi, ldq := mat(op.heads, q, i, T, d)
		ki, ldk := mat(op.heads, k, i, T, d)
		vi, ldv := mat(op.heads, v, i, T, dv)
		yi, ldy := mat(op.heads, y, i, T, dv)
		for r0 := 0; r0 < T; r0 += causalRows {
			r1 := min(r0+causalRows, T)
			w := r1 - r0
			if onSgemm {
				sgemm.LowerABt(r0, r1, d, qi[r0*ldq:], ldq, ki, ldk, s, T) // (w, r1) scores
			} else {
				impl.Sgemm(blas.NoTrans, blas.Trans, w, r1, d, 1, qi[r0*ldq:], ldq, ki, ldk, 0, s, T)
			}
			for r := range w {
				row := s[r*T : r*T+r1]
				softmaxPrefix32(row, row, r0+r+1, sc)
				if p := row[:r0+r+1]; mask != nil {
					vec.Mul(p, p, mask[(i*T+r0+r)*T:]) // Masked's products, rounded as its are
				} else if op.drop != nil {
					op.drop.mulAt(p, p, (i*T+r0+r)*T) // Dropout's
				}
				if !onSgemm {
					t := tri[r*w : (r+1)*w] // the diagonal block, lower triangle only
					copy(t[:r+1], row[r0:r0+r+1])
					clear(t[r+1:])
				}
			}
			if onSgemm { // causalRows is a multiple of every row panel: CausalApply's bits
				sgemm.LowerLB(r0, r1, dv, s, T, vi, ldv, yi[r0*ldy:], ldy)
				continue
			}
			beta := float32(0)
			if r0 > 0 {
				impl.Sgemm(blas.NoTrans, blas.NoTrans, w, dv, r0, 1, s, T, vi, ldv, 0, yi[r0*ldy:], ldy)
				beta = 1
			}
			impl.Sgemm(blas.NoTrans, blas.NoTrans, w, dv, w, 1, tri, w, vi[r0*ldv:], ldv, beta, yi[r0*ldy:], ldy)
		}
	}
	var split *par.Split
	var scratch, tris []float32
	rows := min(T, causalRows)
	split = par.New(N, T*(2*d+dv+T), func(lo, hi int) {
		c := split.ChunkOf(lo)
		s := scratch[c*rows*T : (c+1)*rows*T]
		var tri []float32 // the diagonal blocks' copies, for another BLAS
		if !onSgemm {
			tri = tris[c*rows*rows : (c+1)*rows*rows]
		}
		for i := lo; i < hi; i++ {
			item(i, s, tri)
		}
	})
	scratch = make([]float32, split.Chunks()*rows*T)
	if !onSgemm {
		tris = make([]float32, split.Chunks()*rows*rows)
	}
	return split.Run, nil
}

// Flops is the three ops': CausalProbs', one per element for the mask,
// and CausalApply's.
func (op causalAttendOp) Flops(in []tensor.Shape) float64 {
	N, T, _ := op.heads.dims(in[0])
	tt := tensor.Shape{N, T, T}
	f := causalOp{kind: causalProbs, scale: op.scale, heads: op.heads}.Flops(in[:2]) +
		causalOp{kind: causalApply, heads: op.heads}.Flops([]tensor.Shape{tt, in[2]})
	if op.masked || op.drop != nil {
		f += float64(tt.TotalSize())
	}
	return f
}

func (op causalAttendOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op causalAttendOp) Hashcode() uint32      { return hashOf(op) }
func (op causalAttendOp) String() string {
	if op.drop != nil {
		return fmt.Sprintf("CausalAttend{%v, dropout %v}%v", op.scale, *op.drop, op.heads)
	}
	if op.masked {
		return fmt.Sprintf("CausalAttend{%v, masked}%v", op.scale, op.heads)
	}
	return fmt.Sprintf("CausalAttend{%v}%v", op.scale, op.heads)
}
