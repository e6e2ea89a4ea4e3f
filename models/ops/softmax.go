package ops

import (
	"fmt"
	"hash"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
	"gptlab/planner/arena"
)

// CausalSoftmax is softmax(scale*s) over the last axis of attention
// scores s (N, T, T) with the causal mask fused in: row i attends to
// columns 0..i, the rest are exactly 0 and never computed, as
// masked_fill(-inf) followed by softmax in the reference; scale must be
// positive. Each row is shifted by its own maximum, so large scores cannot
// overflow. Its gradient is CausalSoftmaxGrad(y, dy) = scale*y*(dy - Σ y·dy).
func CausalSoftmax(s *G.Node, scale float64) (*G.Node, error) {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return nil, fmt.Errorf("CausalSoftmax: scale %v, want a positive finite number", scale)
	}
	return G.ApplyOp(causalSoftmaxOp{scale: scale}, s)
}

type causalSoftmaxOp struct {
	opBase
	scale float64
	grad  bool // the backward op: (y, dy) -> ds
}

func (op causalSoftmaxOp) Arity() int {
	if op.grad {
		return 2
	}
	return 1
}
func (op causalSoftmaxOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(tt(3, a), tt(3, a), tt(3, a))
	}
	return hm.NewFnType(tt(3, a), tt(3, a))
}
func (op causalSoftmaxOp) check(in []tensor.Shape) (tensor.Shape, error) {
	s := in[0]
	if s.Dims() != 3 || s[1] != s[2] {
		return nil, fmt.Errorf("%v: shape %v, want (N, T, T)", op, s)
	}
	if op.grad && !in[1].Eq(s) {
		return nil, fmt.Errorf("%v: shapes %v and %v differ", op, s, in[1])
	}
	return s.Clone(), nil
}
func (op causalSoftmaxOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}
func (op causalSoftmaxOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(tensor.New(tensor.WithShape(in[0].Shape().Clone()...), tensor.Of(readDtype(in[len(in)-1]))), in...)
}
func (op causalSoftmaxOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	s, err := op.check(valueShapes(in))
	if err != nil {
		return nil, err
	}
	for _, v := range in {
		if v.Dtype() == tensor.Uint16 { // bf16 bits (ReadsBF16)
			o, err := checkPrealloc(op.String(), out, s, tensor.Float32)
			if err != nil {
				return nil, err
			}
			return runReadingBF16(op, op.String(), o, in)
		}
	}
	if err := checkSameDtype(op.String(), in...); err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, s, in[0].Dtype())
	if err != nil {
		return nil, err
	}
	y, ok := o.Data().([]float64)
	if !ok {
		return runFloat32(op, op.String(), o, in)
	}
	if op.grad {
		causalSoftmaxBackward(y, in[0].Data().([]float64), in[1].Data().([]float64), s[1], 0, op.scale)
	} else {
		causalSoftmaxForward(y, in[0].Data().([]float64), s[1], 0, op.scale)
	}
	return o, nil
}

// BindKernel implements arena.Kernel.
func (op causalSoftmaxOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: a row of the output is written
// after the row's maximum (or dot product) is known, and element j reads
// only element j of the inputs.
func (op causalSoftmaxOp) InPlaceInputs() []int {
	if op.grad {
		return []int{1, 0}
	}
	return []int{0}
}

func (op causalSoftmaxOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBindReading16(op, out, in); err != nil {
		return nil, err
	}
	// independent rows of T; a range [lo, hi) of them is [lo*T, hi*T).
	s := out.Shape // (B*H, T, T), checked by checkBindReading16
	T, rows, scale := s[1], s[0]*s[1], op.scale
	y, a := out.F32, in[0].F32
	if op.grad && (in[0].Is(arena.BF16) || in[1].Is(arena.BF16)) {
		// Rows widened softmaxRows16 at a time into scratch of their chunk.
		var split *par.Split
		var wide []float32
		per := 2 * softmaxRows16 * T
		split = par.New(rows, T, func(lo, hi int) {
			w := wide[split.ChunkOf(lo)*per:][:per]
			for r0 := lo; r0 < hi; r0 += softmaxRows16 {
				a, b := r0*T, min(r0+softmaxRows16, hi)*T
				p := widened(in[0].F32, in[0].U16, a, b, w[:per/2])
				dp := widened(in[1].F32, in[1].U16, a, b, w[per/2:])
				causalSoftmaxBackward32(y[a:b], p, dp, T, r0, scale)
			}
		})
		wide = make([]float32, split.Chunks()*per)
		return split.Run, nil
	}
	if err := checkF32(op.String(), in...); err != nil {
		return nil, err
	}
	if op.grad {
		dy := in[1].F32
		return par.New(rows, T, func(lo, hi int) {
			causalSoftmaxBackward32(y[lo*T:hi*T], a[lo*T:hi*T], dy[lo*T:hi*T], T, lo, scale)
		}).Run, nil
	}
	return par.New(rows, 4*T, func(lo, hi int) {
		causalSoftmaxForward32(y[lo*T:hi*T], a[lo*T:hi*T], T, lo, scale)
	}).Run, nil
}

// softmaxRows16 is the rows CausalSoftmaxGrad widens at a time from bf16.
const softmaxRows16 = 16

// ReadsBF16 implements arena.BF16Reader: CausalSoftmaxGrad reads the
// probabilities and their gradient as bf16 bits by widening
// softmaxRows16 rows at a time into scratch of their chunk (the same
// bits); the forward softmax reads float32 only.
func (op causalSoftmaxOp) ReadsBF16(int) bool { return op.grad }

func (op causalSoftmaxOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op causalSoftmaxOp) Hashcode() uint32      { return hashOf(op) }
func (op causalSoftmaxOp) String() string {
	if op.grad {
		return fmt.Sprintf("CausalSoftmaxGrad{%v}", op.scale)
	}
	return fmt.Sprintf("CausalSoftmax{%v}", op.scale)
}
func (op causalSoftmaxOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	r[0] = !op.grad
	return r
}
func (op causalSoftmaxOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	ds, err := G.ApplyOp(causalSoftmaxOp{scale: op.scale, grad: true}, out, grad)
	return G.Nodes{ds}, err
}

// causalSoftmaxForward: y[n,i,j] = exp(scale*s[n,i,j] - m) / Σ_{j'≤i} (…)
// for j ≤ i, where m is the row's maximum; 0 for j > i. s and y start at
// row first of the (N*T, T) matrix (for a split across goroutines). The
// float64 reference of causalSoftmaxForward32, with math.Exp.
func causalSoftmaxForward(y, s []float64, T, first int, scale float64) {
	for r := 0; r+T <= len(s); r += T {
		i := (first + r/T) % T // query position of this row
		sr, yr := s[r:r+i+1], y[r:r+T]
		m := math.Inf(-1)
		for _, v := range sr {
			m = max(m, scale*v)
		}
		var sum float64
		for j, v := range sr {
			e := math.Exp(scale*v - m)
			sum += e
			yr[j] = e
		}
		for j := range sr {
			yr[j] /= sum
		}
		clear(yr[i+1:])
	}
}

// causalSoftmaxForward32 is causalSoftmaxForward on float32 with vec's
// vector exp (each argument scale·s - max rounded once, the row's sum in
// float64); masked entries are never read. y may be s.
func causalSoftmaxForward32(y, s []float32, T, first int, scale float64) {
	sc := float32(scale)
	for r := 0; r+T <= len(s); r += T {
		i := (first + r/T) % T // query position of this row
		softmaxPrefix32(y[r:r+T], s[r:r+T], i+1, sc)
	}
}

// softmaxPrefix32 is one row of the causal softmax: y[:n] the softmax of
// sc·s[:n] (sc > 0), y[n:] zero (s[n:] is never read). y may be s.
func softmaxPrefix32(y, s []float32, n int, sc float32) { vec.SoftmaxPrefix(y, s, n, sc) }

// causalSoftmaxBackward32 is causalSoftmaxBackward on float32 rows, each
// row's dot and elements in vec.SoftmaxGrad's vector loops: the same
// operations in the same order, so the same bits.
func causalSoftmaxBackward32(ds, y, dy []float32, T, first int, scale float64) {
	for r := 0; r+T <= len(y); r += T {
		n := (first+r/T)%T + 1 // row i's j <= i
		vec.SoftmaxGrad(ds[r:r+n], y[r:r+n], dy[r:r+n], scale)
		clear(ds[r+n : r+T])
	}
}

// causalSoftmaxBackward: ds = scale*y*(dy - Σ_j y·dy) on j ≤ i, 0 above;
// ds may be y or dy.
func causalSoftmaxBackward[F float](ds, y, dy []F, T, first int, scale float64) {
	for r := 0; r+T <= len(y); r += T {
		i := (first + r/T) % T
		yr := y[r : r+i+1]
		dyr := dy[r : r+i+1]
		dsr := ds[r : r+T]
		dyr = dyr[:len(yr)]
		dot := dot4(yr, dyr)
		dsi := dsr[:len(yr)]
		for j, v := range yr {
			dsi[j] = F(scale * float64(v) * (float64(dyr[j]) - dot))
		}
		clear(dsr[len(yr):])
	}
}
