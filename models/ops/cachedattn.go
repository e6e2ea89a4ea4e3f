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
	"gptlab/planner/arena"
)

// KV is one layer of a key-value cache as CachedAttention appends to it
// and attends over it: for B sequences of up to Block tokens, the keys K
// and values V of H heads of HeadSize each, laid out (B*H, Block,
// HeadSize) so that the keys of one head are contiguous and the first n of
// them one matrix, and the tokens each sequence holds. The storage belongs
// to the caller (it lives outside any arena); Lens is read when the op
// runs, and the caller advances it after the run.
type KV struct {
	B, H, Block, HeadSize int
	K, V                  []float32 // (B*H, Block, HeadSize)
	Lens                  []int     // (B) tokens held per sequence
	Layer                 int       // the layer this is, for the op's name
}

// CachedAttention appends the keys k and values v of T new tokens of
// every sequence (B*H, T, hs) to kv and returns the attention of the
// queries q (B*H, T, hs) over all the tokens kv then holds: query t of
// row b, at position Lens[b]+t, sees keys 0 … Lens[b]+t, with
// softmax(q·kᵀ/√hs) as CausalSoftmax computes it. It is forward-only (a
// decoder runs no backward), float32 only.
func CachedAttention(q, k, v *G.Node, kv *KV) (*G.Node, error) {
	return G.ApplyOp(cachedAttnOp{kv: kv}, q, k, v)
}

type cachedAttnOp struct {
	opBase
	kv *KV
}

func (op cachedAttnOp) Arity() int { return 3 }
func (op cachedAttnOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a), tt(3, a))
}

func (op cachedAttnOp) check(in []tensor.Shape) (tensor.Shape, error) {
	c := op.kv
	hs := c.HeadSize
	want := tensor.Shape{c.B * c.H, 0, hs}
	for _, s := range in {
		if s.Dims() != 3 || s[0] != want[0] || s[2] != hs || !s.Eq(in[0]) || s[1] > c.Block {
			return nil, fmt.Errorf("%v: q, k, v %v, %v, %v: want three (%d, T, %d) with T <= %d", op, in[0], in[1], in[2], want[0], hs, c.Block)
		}
	}
	return in[0].Clone(), nil
}

func (op cachedAttnOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}

func (op cachedAttnOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}

func (op cachedAttnOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runFloat32(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op cachedAttnOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op cachedAttnOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBind(op, out, in); err != nil {
		return nil, err
	}
	s := out.Shape
	c := op.kv
	H, Tmax, hs, T := c.H, c.Block, c.HeadSize, s[1]
	q, k, v, y := in[0].F32, in[1].F32, in[2].F32, out.F32
	K, V := c.K, c.V
	scores := make([]float32, s[0]*T*Tmax) // each head's (T, n) scores, n <= Tmax
	sc := float32(1 / math.Sqrt(float64(hs)))
	impl := tensor.WhichBLAS()
	return par.New(s[0], T*Tmax*hs, func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			pos := c.Lens[bh/H]
			n := pos + T
			if n > Tmax {
				panic(fmt.Sprintf("%v: row %d holds %d tokens, %d more exceed the block of %d", op, bh/H, pos, T, Tmax))
			}
			kh, vh := K[bh*Tmax*hs:(bh+1)*Tmax*hs], V[bh*Tmax*hs:(bh+1)*Tmax*hs] // (Tmax, hs)
			copy(kh[pos*hs:n*hs], k[bh*T*hs:(bh+1)*T*hs])
			copy(vh[pos*hs:n*hs], v[bh*T*hs:(bh+1)*T*hs])
			st := scores[bh*T*Tmax : bh*T*Tmax+T*n] // (T, n)
			qh, yh := q[bh*T*hs:(bh+1)*T*hs], y[bh*T*hs:(bh+1)*T*hs]
			impl.Sgemm(blas.NoTrans, blas.Trans, T, n, hs, 1, qh, hs, kh[:n*hs], hs, 0, st, n) // (T, n) = q·kᵀ
			for t := range T {
				softmaxPrefix32(st[t*n:(t+1)*n], st[t*n:(t+1)*n], pos+t+1, sc)
			}
			impl.Sgemm(blas.NoTrans, blas.NoTrans, T, hs, n, 1, st, n, vh[:n*hs], hs, 0, yh, hs) // (T, hs) = att·v
		}
	}).Run, nil
}

func (op cachedAttnOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op cachedAttnOp) Hashcode() uint32      { return hashOf(op) }
func (op cachedAttnOp) String() string {
	return fmt.Sprintf("CachedAttention{layer %d, %p}", op.kv.Layer, op.kv)
}
