package models

// runningmean.go: a stateful statistic inside the forward (the one the
// checkpointing lab replays), applied as a pass: the hook that puts its
// update op on the input of layer 0's MLP half.

import (
	G "gorgonia.org/gorgonia"

	"gptlab/models/ops"
)

// RunningMean is a stateful update inside the forward (ops.RunningMean):
// an exponential running mean of the mean of the values a layer sees, as
// BatchNorm keeps running_mean (here one number). Every forward that runs
// its op updates it: Mean = (1-Momentum)·Mean + Momentum·mean(x). A
// checkpointed step that recomputes the segment holding it runs the op
// twice, and so updates twice, unless the recomputation is built with the
// guard (the update runs on the first pass only; the recomputation reads,
// never writes).
type RunningMean = ops.RunningMean

// WithRunningMean puts stat on the input of layer 0's MLP half (the
// stateful update the checkpointing lab replays); with guard, a
// recomputation of that half does not update it.
func WithRunningMean(stat *RunningMean, guard bool) ModelOption {
	return func(o *modelOptions) { o.stat, o.statGuard = stat, guard }
}

// runningMean is the hook of WithRunningMean: at each forward of layer
// 0's MLP half, an update op on the half's input (a recomputation's reads
// only, with guard).
type runningMean struct {
	noHook
	stat  *RunningMean
	guard bool
	nodes []*G.Node // the update ops built (the step retains them)
}

func (r *runningMean) forward(n *builder, seg Segment, in *G.Node, again bool) {
	if seg.Kind != SegMLP || seg.Layer != 0 {
		return
	}
	update := !(again && r.guard)
	r.nodes = append(r.nodes, n.do(func() (*G.Node, error) { return ops.UpdateMean(in, r.stat, update) })) // (1)
}
