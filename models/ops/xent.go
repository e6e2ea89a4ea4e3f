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

// CrossEntropy is the mean over the N rows of logits (N, V) of
// -log softmax(row)[target], with targets an Int vector (N): log-softmax
// and the negative log-likelihood fused, each row shifted by its maximum
// (F.cross_entropy in the reference). The result has shape (1), so it is
// a tensor the arena can plan like any other (a gorgonia scalar has no
// storage to bind). Its gradient is CrossEntropyGrad(logits, targets,
// dloss) = (softmax - onehot)*dloss/N, dloss of shape (1).
func CrossEntropy(logits, targets *G.Node) (*G.Node, error) {
	return G.ApplyOp(xentOp{}, logits, targets)
}

// CrossEntropyOf is these rows' share of the mean over n rows: the sum of
// their -log softmax(row)[target] divided by n (n at least their number).
// Losses of parts of a batch, each CrossEntropyOf the batch's rows, add up
// to its mean, and each part's gradient rows are bitwise those of
// CrossEntropy over the whole batch: (softmax - onehot)*dloss/n.
func CrossEntropyOf(logits, targets *G.Node, n int) (*G.Node, error) {
	if rows := logits.Shape(); rows.Dims() != 2 || n < rows[0] {
		return nil, fmt.Errorf("CrossEntropyOf: logits %v as a share of %d rows", rows, n)
	}
	return G.ApplyOp(xentOp{of: n}, logits, targets)
}

type xentOp struct {
	opBase
	grad bool // the backward op: (logits, targets, dloss) -> dlogits
	of   int  // the mean's rows (CrossEntropyOf); 0: the logits' own
}

// rows is the number of rows the mean divides by: of, or the N rows read.
func (op xentOp) rows(N int) int {
	if op.of > 0 {
		return op.of
	}
	return N
}

func (op xentOp) Arity() int {
	if op.grad {
		return 3
	}
	return 2
}
func (op xentOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	if op.grad {
		return hm.NewFnType(tt(2, a), tt(1, tensor.Int), tt(1, a), tt(2, a))
	}
	return hm.NewFnType(tt(2, a), tt(1, tensor.Int), tt(1, a))
}
func (op xentOp) check(in []tensor.Shape) error {
	l, t := in[0], in[1]
	if l.Dims() != 2 || t.TotalSize() != l[0] {
		return fmt.Errorf("%v: logits %v and targets %v, want (N, V) and (N)", op, l, t)
	}
	return nil
}
func (op xentOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	s := shapesOf(in)
	if err := op.check(s); err != nil {
		return nil, err
	}
	if op.grad {
		return s[0].Clone(), nil
	}
	return tensor.Shape{1}, nil
}
func (op xentOp) Do(in ...G.Value) (G.Value, error) {
	if op.grad {
		return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
	}
	return op.UsePreallocDo(newLike(in[0], tensor.Shape{1}), in...)
}

// targetsOf checks the Int targets against the vocabulary V.
func targetsOf(op string, v G.Value, V int) ([]int, error) {
	t, ok := v.Data().([]int)
	if !ok {
		return nil, fmt.Errorf("%s: targets are %T, want []int", op, v.Data())
	}
	for i, x := range t {
		if x < 0 || x >= V {
			return nil, fmt.Errorf("%s: target %d at row %d outside [0, %d)", op, x, i, V)
		}
	}
	return t, nil
}

func (op xentOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if err := op.check(valueShapes(in)); err != nil {
		return nil, err
	}
	if err := checkSameDtype(op.String(), in[0]); err != nil {
		return nil, err
	}
	V := in[0].Shape()[1]
	t, err := targetsOf(op.String(), in[1], V)
	if err != nil {
		return nil, err
	}
	if in[0].Dtype() == tensor.Float32 {
		return runFloat32(op, op.String(), out, in)
	}
	l := in[0].Data().([]float64)
	if !op.grad {
		loss := xentForward(l, t, V)
		if op.of > 0 { // the mean over these rows, as a share of of rows
			loss = loss * float64(len(t)) / float64(op.of)
		}
		switch o := out.(type) {
		case *G.F64:
			*o = G.F64(loss)
		case *tensor.Dense:
			if o.Size() != 1 || o.Dtype() != tensor.Float64 {
				return nil, fmt.Errorf("%v: output buffer %v %v, want a float64 scalar", op, o.Shape(), o.Dtype())
			}
			o.Set(0, loss)
		default:
			return nil, fmt.Errorf("%v: output buffer is %T", op, out)
		}
		return out, nil
	}
	dloss, err := scalarOf(op.String(), in[2])
	if err != nil {
		return nil, err
	}
	o, err := checkPrealloc(op.String(), out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	xentBackward(o.Data().([]float64), l, t, V, dloss/float64(op.rows(len(t))))
	return o, nil
}

// BindKernel implements arena.Kernel.
func (op xentOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: the gradient may overwrite the
// logits (a row's target logit and log-sum-exp are read before the row is
// written). The loss is one number: nothing to overwrite.
func (op xentOp) InPlaceInputs() []int {
	if op.grad {
		return []int{0}
	}
	return nil
}

func (op xentOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != op.Arity() {
		return nil, fmt.Errorf("%v: %d inputs, want %d", op, len(in), op.Arity())
	}
	if err := checkF32(op.String(), out, in[0]); err != nil {
		return nil, err
	}
	if err := op.check(shapesOfBufs(in)); err != nil {
		return nil, err
	}
	if !in[1].Is(arena.Int) {
		return nil, fmt.Errorf("%v: targets are not int storage of shape %v", op, in[1].Shape)
	}
	N, V := in[0].Shape[0], in[0].Shape[1]
	l, t := in[0].F32, in[1].Int
	if !op.grad {
		if len(out.F32) != 1 {
			return nil, fmt.Errorf("%v: output %v, want (1)", op, out.Shape)
		}
		losses := make([]float64, N)
		var split *par.Split
		var exps []float32 // a row of exponentials for each chunk
		split = par.New(N, 2*V, func(lo, hi int) {
			c := split.ChunkOf(lo)
			xentRows32(losses[lo:hi], l[lo*V:hi*V], t[lo:hi], V, exps[c*V:(c+1)*V])
		})
		exps = make([]float32, split.Chunks()*V)
		return func() {
			checkTargets(op, t, V)
			split.Run()
			var total float64
			for _, v := range losses {
				total += v
			}
			out.F32[0] = float32(total / float64(op.rows(N)))
		}, nil
	}
	if err := checkF32(op.String(), in[2]); err != nil || len(in[2].F32) != 1 {
		return nil, fmt.Errorf("%v: upstream gradient %v, want float32 (1)", op, in[2].Shape)
	}
	if !out.Shape.Eq(in[0].Shape) {
		return nil, fmt.Errorf("%v: output %v, want %v", op, out.Shape, in[0].Shape)
	}
	d, dloss := out.F32, in[2].F32
	var k float64 // dloss/N, set before each run of split
	split := par.New(N, 3*V, func(lo, hi int) {
		xentBackward32(d[lo*V:hi*V], l[lo*V:hi*V], t[lo:hi], V, k)
	})
	return func() {
		checkTargets(op, t, V)
		k = float64(dloss[0]) / float64(op.rows(N))
		split.Run()
	}, nil
}

// checkTargets panics on a target outside [0, V): a kernel cannot return
// an error, and reading outside a row would be silently wrong.
func checkTargets(op xentOp, t []int, V int) {
	for i, x := range t {
		if uint(x) >= uint(V) {
			panic(fmt.Sprintf("%v: target %d at row %d outside [0, %d)", op, x, i, V))
		}
	}
}
func (op xentOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op xentOp) Hashcode() uint32      { return hashOf(op) }
func (op xentOp) String() string {
	s := "CrossEntropy"
	if op.grad {
		s += "Grad"
	}
	if op.of > 0 {
		s += fmt.Sprintf("{of %d}", op.of)
	}
	return s
}
func (op xentOp) DiffWRT(n int) []bool {
	r := make([]bool, n)
	r[0] = !op.grad
	return r
}
func (op xentOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	if op.grad {
		return nil, fmt.Errorf("%v is not differentiable", op)
	}
	d, err := G.ApplyOp(xentOp{grad: true, of: op.of}, in[0], in[1], grad)
	return G.Nodes{d, nil}, err
}

// rowLogSumExp is log Σ exp(row), shifted by the row's maximum: the
// float64 reference, with math.Exp.
func rowLogSumExp(row []float64) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, v)
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(v - m)
	}
	return m + math.Log(sum)
}

// rowLogSumExp32 is rowLogSumExp of a float32 row, its exponentials
// (vec.ExpSum's, shifted by the row's maximum) written to exps.
func rowLogSumExp32(row, exps []float32) float64 {
	m := vec.Max(row)
	return float64(m) + math.Log(vec.ExpSum(exps, row, 1, m))
}

func xentForward(logits []float64, t []int, V int) float64 {
	var total float64
	for n, tg := range t {
		row := logits[n*V : (n+1)*V]
		total += rowLogSumExp(row) - row[tg]
	}
	return total / float64(len(t))
}

// xentRows32 writes each row's -log softmax(row)[target] into loss; exps
// is a scratch row of V.
func xentRows32(loss []float64, logits []float32, t []int, V int, exps []float32) {
	t = t[:len(loss)]
	for n, tg := range t {
		row := logits[n*V : (n+1)*V]
		loss[n] = rowLogSumExp32(row, exps) - float64(row[tg])
	}
}

// xentBackward writes (softmax(row) - onehot(target))*k for each row; k is
// dloss/N. The float64 reference of xentBackward32.
func xentBackward(d, logits []float64, t []int, V int, k float64) {
	for n, tg := range t {
		row, dr := logits[n*V:(n+1)*V], d[n*V:(n+1)*V]
		lse := rowLogSumExp(row)
		for j, v := range row {
			dr[j] = math.Exp(v-lse) * k
		}
		dr[tg] = (math.Exp(row[tg]-lse) - 1) * k
	}
}

// xentBackward32 is xentBackward on float32 rows: each row's
// exponentials (vec.ExpSum, shifted by its maximum) scaled by k over
// their sum, k taken off at the target. d may be logits.
func xentBackward32(d, logits []float32, t []int, V int, k float64) {
	for n, tg := range t {
		row := logits[n*V : (n+1)*V]
		dr := d[n*V : (n+1)*V]
		sum := vec.ExpSum(dr, row, 1, vec.Max(row))
		vec.Scale(dr, dr, float32(k/sum))
		dr[tg] -= float32(k)
	}
}

// IsCrossEntropy reports whether op is a CrossEntropy op or its gradient
// (a graph pass that must leave the loss alone asks).
func IsCrossEntropy(op G.Op) bool {
	_, ok := op.(xentOp)
	return ok
}
