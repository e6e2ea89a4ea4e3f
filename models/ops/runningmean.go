package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner/arena"
)

// RunningMean is the state of a stateful op inside a forward: an
// exponential running mean of the mean of the values it sees, as
// BatchNorm keeps running_mean (here one number). Every run of an
// UpdateMean op with update set changes it:
// Mean = (1-Momentum)·Mean + Momentum·mean(x).
type RunningMean struct {
	Mean     float64
	Momentum float64
	Updates  int // runs that updated Mean
}

// UpdateMean returns the mean of x (N, C) as a (1) tensor and, when
// update is set, folds it into stat each time the op runs (a
// recomputation built with update false reads, never writes). Float32
// only; not differentiable.
func UpdateMean(x *G.Node, stat *RunningMean, update bool) (*G.Node, error) {
	return G.ApplyOp(runningMeanOp{stat: stat, update: update}, x)
}

// runningMeanOp is the update: x (N, C) -> the batch mean (1), updating
// the stat when update is set.
type runningMeanOp struct {
	opBase
	stat   *RunningMean
	update bool
}

func (op runningMeanOp) Arity() int { return 1 }
func (op runningMeanOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tt(2, a), tt(1, a))
}
func (op runningMeanOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return tensor.Shape{1}, nil
}
func (op runningMeanOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], tensor.Shape{1}), in...)
}
func (op runningMeanOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	return runFloat32(op, op.String(), out, in)
}

// BindKernel implements arena.Kernel.
func (op runningMeanOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

func (op runningMeanOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	if err := checkF32(op.String(), out, in[0]); err != nil {
		return nil, err
	}
	if out.Shape.TotalSize() != 1 {
		return nil, fmt.Errorf("%v: output %v, want (1)", op, out.Shape)
	}
	x, y := in[0].F32, out.F32
	return func() {
		s, _ := moments4(x)
		mean := s / float64(len(x))
		y[0] = float32(mean)
		if op.update {
			op.stat.Mean = (1-op.stat.Momentum)*op.stat.Mean + op.stat.Momentum*mean
			op.stat.Updates++
		}
	}, nil
}
func (op runningMeanOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op runningMeanOp) Hashcode() uint32      { return hashOf(op) }
func (op runningMeanOp) String() string {
	return fmt.Sprintf("RunningMean{%p, update %v}", op.stat, op.update)
}
