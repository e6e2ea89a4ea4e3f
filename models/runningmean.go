package models

import "gptlab/models/ops"

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
