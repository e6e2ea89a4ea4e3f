// Package models owns the small GPT of gptlab: configuration presets
// (Config, Preset), parameters under nanoGPT's names in one backing slice
// (Params), the gorgonia graph of a training or evaluation step (Model),
// AdamW exactly as torch.optim.AdamW, counter-based dropout masks, and
// safetensors I/O. Data, tokenizer, corpus, batching, sampling and the
// training loop live in this package too, in their own files. It does not
// own memory planning (package planner), precision conversion (package
// precision) or parallelism (package parallel).
//
// The graph is built from gorgonia's sound ops (BatchedMatMul, ByIndices,
// Add, HadamardProd) and this package's custom ops, each a gorgonia SDOp
// whose SymDiff builds its backward ops, so gorgonia.Grad differentiates
// the whole model; every op implements UsePreallocDoer so a planned arena
// can hold its output: AddBias/ColSum, LayerNorm (eps 1e-5), GELU (exact,
// erf), SplitHeads/MergeHeads, CausalSoftmax (mask, scale and softmax
// fused) and CrossEntropy (log-softmax and NLL fused, mean over B*T).
//
// Numerics follow ../shared/peer/gpt_reference.py: on its golden cases
// (../shared/golden/tiny and testdata/golden) the logits, the loss and
// every gradient agree within 1e-4 absolute and three AdamW steps within
// 1e-5 (parity_test.go).
//
// Dimension letters in shape comments: B batch, T sequence length, C
// embedding width, H heads, hs = C/H head size, V vocabulary, N = B*T rows.
package models
