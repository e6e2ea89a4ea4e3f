// Package models owns the small GPT of gptlab: configuration presets
// (Config, Preset), parameters under nanoGPT's names in one backing slice
// (Params), the layer functions the graphs are built from, the graphs
// built from them — a training or evaluation step (Model), a KV-cached
// decoder (Decoder: prefill and one-token decode), a segment of the
// forward as a unit with its own backward (Unit, Chain), a Megatron
// shard of a block (BlockShard) — their reverse-mode differentiation
// (Backward), AdamW exactly as torch.optim.AdamW with a hook between the
// backward and the update (Trainer.GradHook) and each gradient's moment
// in the schedule (GradSchedule, OnGradReady), and parameters and
// training checkpoints as safetensors files. Data, tokenizer, corpus,
// batching, sampling and the training loop live in this package too. It
// does not own memory planning (package planner), the executor and its
// generic ops (package planner/arena), precision conversion (package
// precision), parallelism (package parallel), or the safetensors format
// and atomic writes (internal/safetensors, internal/atomicfile).
//
// The model and the passes over its graph, a file each:
//
//	layers.go       the GPT as nanoGPT's model.py reads: embed, linear,
//	                layerNorm, attention, mlp, the two halves of a block, head
//	builder.go      the graph builder those are methods of, and the hook
//	                interface through which a pass changes or watches them
//	dropout.go      dropout's mask inputs and the list a graph feeds; rng.go
//	                their generators (counter-based or stateful, WithRNG)
//	mixed.go        the casts of a 16-bit precision policy (WithPrecision);
//	                mixed_memory.go what its step keeps (Memory, WatchUnderflow)
//	recompute.go    step schedules (gradient checkpointing, Megatron's
//	                selective recomputation of attention cores); chaincost.go
//	                what each pass of one costs (PassCosts, MeasureChain)
//	runningmean.go  the running statistic in the forward (WithRunningMean)
//	shard.go        a block split over ranks, Megatron-style (BlockShard)
//	gpt.go, decoder.go, unit.go  the graphs: Model, Decoder, Unit
//
// A pass is applied as the layers build the graph, not written into them:
// the builder hands every op output, weight product, attention core and
// dropout mask to its hooks in order (builder.go), and the plain float32
// model is the builder with no hook but the mask list.
//
// The graphs are gorgonia graphs of the ops of package models/ops
// (AddBias/ColSum, LayerNorm, GELU, the causal products on heads in
// place, SplitHeads/MergeHeads for the KV cache, CausalSoftmax, CrossEntropy, Gemm16, CachedAttention) and of
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
