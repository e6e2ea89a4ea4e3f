// Package ops holds the custom gorgonia ops the GPT of package models is
// built from, each bound to the arena executor (planner/arena):
//
//	AddBias, ColSum              a Linear layer's bias and its gradient
//	LayerNorm                    torch.nn.LayerNorm, eps 1e-5; gradient: LayerNormGradX, LayerNormGradW, ColSum
//	GELU                         exact (erf) GELU; gradient: GELUGrad
//	SplitHeads, MergeHeads       (B*T, C) <-> (B*H, T, hs), each the other's gradient (the KV cache's)
//	CausalScores, CausalApply    attention's products over the lower triangle only
//	CausalSoftmax                mask, scale and softmax fused; gradient: CausalSoftmaxGrad
//	CausalProbs                  CausalScores then CausalSoftmax in one pass, block by block
//	CausalProbsHeads, CausalApplyHeads, CausalAttendHeads
//	                             the same on (B*T, C) rows, the heads read and written in place (the GPT's)
//	CrossEntropy                 log-softmax and NLL fused, mean over the rows; gradient: CrossEntropyGrad
//	Gemm16                       a matrix product of bfloat16-rounded operands (internal/bf16gemm)
//	CachedAttention              append to a caller's KV storage and attend over it (forward only)
//	UpdateMean                   a stateful running mean inside a forward (RunningMean)
//	Dropout                      inverted dropout, each mask bit drawn in the kernel from (seed, step, layer,
//	                             site, position); its gradient is the same op (CausalAttendHeadsDropout: in the core)
//	DropoutMask                  the same masks as a tensor (no op: for a caller's mask inputs and the tests)
//
// Every op is a gorgonia Op whose SymDiff (for the differentiable ones)
// builds its backward ops, so gorgonia.Grad differentiates a graph of
// them; a UsePreallocDoer, so an executor that plans memory binds its
// output; and an arena.Kernel, which validates the shapes once and returns
// a closure over the bound slices that allocates nothing when run (and an
// arena.InPlacer where an output may overwrite an input). On float32
// values UsePreallocDo runs that same kernel, so the arena and gorgonia's
// TapeMachine compute bitwise the same thing; float64 values (what the
// finite-difference tests use) run reference loops with math.Exp and
// math.Erf. Both accumulate in float64.
//
// It does not own the GPT: configs, parameters, the layers and the graphs
// built from these ops, dropout's sites and the KV cache's bookkeeping are
// package models', and no op here knows a model config (shapes come from
// the inputs and from arguments such as B, T and H). Nor does it own the
// executor and its generic ops (MatMul, Add, Masked, Gather, Reshape,
// Cast: planner/arena), the vector kernels (internal/vec), the GEMMs
// (internal/sgemm, internal/bf16gemm) or the worker pool (internal/par).
//
// Dimension letters in shape comments: B batch, T sequence length, C
// channels, H heads, hs = C/H head size, V vocabulary, N rows.
package ops
