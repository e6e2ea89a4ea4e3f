// Package models owns the small GPT of gptlab: configuration presets
// (Config, Preset), parameters under nanoGPT's names in one backing slice
// (Params), the layer functions the graphs are built from (layers.go:
// embed, linear, attention, mlp, the two halves of a block, head, as
// nanoGPT's model.py reads), the graphs built from them — a training or
// evaluation step (Model), a KV-cached decoder (Decoder: prefill and one-
// token decode), a segment of the forward as a unit with its own backward
// (Unit, Chain) — their reverse-mode differentiation (Backward), AdamW
// exactly as torch.optim.AdamW with a hook between the backward and the
// update (Trainer.GradHook) and each gradient's moment in the schedule
// (GradSchedule, OnGradReady), mixed-precision steps under a precision
// policy (WithPrecision: 16-bit casts at the op boundaries, 16-bit saved
// activations, Memory, WatchUnderflow; dynamic loss scaling in the
// Trainer), counter-based dropout masks, and parameters and training
// checkpoints as safetensors files. Data, tokenizer, corpus, batching,
// sampling and the training loop live in this package too, in their own
// files. It does not own memory planning (package planner), the executor
// and its generic ops (package planner/arena), precision conversion
// (package precision), parallelism (package parallel), or the safetensors
// format and atomic writes (internal/safetensors, internal/atomicfile).
//
// The graphs are gorgonia graphs of the ops of package models/ops
// (AddBias/ColSum, LayerNorm, GELU, SplitHeads/MergeHeads, the causal
// products, CausalSoftmax, CrossEntropy, Gemm16, CachedAttention) and of
// package arena's (MatMul, Add, Masked, Gather, Reshape, Cast); every op
// runs allocation-free on storage the arena binds once.
//
// Numerics follow ../shared/peer/gpt_reference.py: on its golden cases
// (../shared/golden/tiny and testdata/golden) the logits, the loss and
// every gradient agree within 1e-4 absolute and three AdamW steps within
// 1e-5 (parity_test.go).
//
// Dimension letters in shape comments: B batch, T sequence length (the
// query length of a graph), C embedding width, H heads, hs = C/H head
// size, V vocabulary, N = B*T rows.
package models
