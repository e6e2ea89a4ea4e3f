package models

// mixed.go: mixed-precision training as a pass over the graph: the hook
// (mixed) that casts op outputs and weights to a 16-bit policy's formats
// as the layers build, and what the backward reads in their place.

import (
	"fmt"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/bf16gemm"
	"gptlab/models/ops"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// WithPrecision builds the graph under a precision policy: mixed-precision
// training in the graph. Under a policy whose storage format is 16-bit
// (bf16 or fp16), the GPT's graph is the float32 graph with arena.Cast ops
// at its op boundaries:
//
//   - every op output of the forward is cast down to the storage format
//     where it is produced (a 2-byte buffer in the arena), and the ops that
//     read it read its cast back up: a float32 temporary that dies with its
//     last forward reader. A linear layer's x·Wᵀ + b counts as one op (as
//     torch's addmm), rounded once after the bias; the loss is not cast
//     (it is the step's float32 output).
//   - the weights a matrix product reads (the linear layers' and the tied
//     head's) are cast down from the float32 master weights once per step,
//     and the products read their cast back up; so every GEMM input is
//     rounded to the storage format, and the GEMM accumulates in float32
//     (the products of two bf16 or fp16 values are exact in float32).
//   - the backward reads no float32 forward value: where an op's backward
//     needs a forward value (a product's operands, GELU's input and
//     output, the softmax's probabilities, LayerNorm's input, the logits),
//     BackwardReading hands it a cast up of the 16-bit copy, a node of the
//     backward that the schedule places shortly before its reader, so what
//     the forward keeps for the backward is 16-bit.
//   - gradients cross each op boundary in the storage format: the cast's
//     derivative is the cast the other way, so the gradient of every
//     stored value is rounded to 16 bits (this is where fp16's small
//     gradients flush to zero without loss scaling), and the gradient of a
//     16-bit weight copy is rounded once before it is added, in float32,
//     into the master's gradient. The attention's scores, which
//     CausalProbs fuses with their softmax and never stores, have their
//     gradient rounded as a stored value's (ops.GradientsIn), as
//     torch.autocast's bf16 scores do.
//   - on the bf16 speed path (the linear layers on internal/bf16gemm) the
//     attention's products multiply bf16 too (ops.BF16Products: VDPBF16PS
//     where bf16gemm's calibration finds it faster on the items' size);
//     their operands are all stored bf16 values, so only the order of the
//     float32 sums differs from the cast step's.
//
// What stays float32, and why: every op computes in float32 (with float64
// row sums where the f32 ops have them) on inputs cast up, so the
// reductions where a 16-bit format is known to fail are never made in it:
// the softmax's max, exponentials and row sums (a row's exponentials add
// up to about 1, and a bf16 sum near 1, with 8 significant bits, drops
// every term below 2^-9 whole), LayerNorm's mean and
// variance (a variance from E[x²]−E[x]² in 16 bits cancels
// catastrophically), the cross-entropy's log-sum-exp and the mean over
// B*T tokens (the loss, and its gradient 1/N per token, below fp16's
// normal range for N > 16384), the sums of gradient contributions, the
// bias and LayerNorm parameter gradients (column sums over B*T rows) and
// every GEMM's accumulation. LayerNorm's weight and bias, the biases, the
// position embedding and the embedding table as the token lookup reads it
// are read from the float32 master (they are no matrix product's
// operand, as under torch.autocast). The master weights and AdamW's
// moments are float32 (Trainer).
//
// The f32 policy (and the zero Policy) builds exactly the float32 graph,
// no cast at all, so its step is bitwise the plain model's. A policy must
// keep its gradients in its activations' format (the casts carry both),
// read its weights in that format or in float32, and accumulate and keep
// its master weights in float32. It composes with a step schedule
// (WithStepSchedule), as torch.utils.checkpoint does under autocast: a
// recomputation reads the cast up of its input's 16-bit copy and stores
// what it computes as the first forward did, so every schedule gives the
// policy's loss and gradients bitwise (recompute_test.go).
func WithPrecision(p precision.Policy) ModelOption {
	return func(o *modelOptions) { o.precision = p }
}

// backTag tells the backward's aliases of stored values apart from any
// other alias of them (arena.Alias).
const backTag = 0x16b

// mixed is the pass of a 16-bit policy: the hook (builder.go) that
// builds the casts as the layers build the graph.
type mixed struct {
	noHook
	policy  precision.Policy
	act, wt arena.Dtype         // storage of activations and gradients; of weights as the GEMMs read them
	stored  map[*G.Node]*G.Node // an op output, and the cast up its readers read, -> its 16-bit copy
	weights map[*G.Node]*G.Node // a parameter node -> the cast up of its 16-bit copy
	copies  map[*G.Node]bool    // the weights' 16-bit copies
	back    map[*G.Node]*G.Node // a 16-bit copy -> the cast up the backward reads
	gemm16  bool                // the linear layers multiply on internal/bf16gemm
}

// storage is the arena type of a storage format.
func storage(f precision.Format) arena.Dtype {
	switch f {
	case precision.BF16:
		return arena.BF16
	case precision.FP16:
		return arena.FP16
	}
	return arena.F32
}

// newMixed is the building state of policy p, or nil for a policy that
// keeps everything in float32.
func newMixed(p precision.Policy) (*mixed, error) {
	if !p.Mixed() {
		return nil, nil
	}
	switch {
	case p.Gradients != p.Activations:
		return nil, fmt.Errorf("%w: precision %s: gradients in %v, activations in %v (the graph keeps both in one format)", ErrConfig, p.Name, p.Gradients, p.Activations)
	case p.Weights != precision.F32 && p.Weights != p.Activations:
		return nil, fmt.Errorf("%w: precision %s: weights read as %v, activations %v (want the same, or f32)", ErrConfig, p.Name, p.Weights, p.Activations)
	case p.Accumulate != precision.F32 || p.Master != precision.F32:
		return nil, fmt.Errorf("%w: precision %s: accumulation and master weights must be f32", ErrConfig, p.Name)
	}
	mp := &mixed{policy: p, act: storage(p.Activations), wt: storage(p.Weights),
		stored: map[*G.Node]*G.Node{}, weights: map[*G.Node]*G.Node{}, copies: map[*G.Node]bool{}, back: map[*G.Node]*G.Node{}}
	mp.gemm16 = mp.wt == arena.BF16 && mp.act == arena.BF16 && useGemm16()
	return mp, nil
}

// gemm16Override decides for the tests whether bf16 models multiply on
// internal/bf16gemm: +1 always (the speed path's graph on any machine),
// -1 never (the cast step with the model's BLAS), 0 as useGemm16 says.
var gemm16Override int

// useGemm16 reports whether the linear layers of a bf16 model multiply on
// internal/bf16gemm: wherever it has a hardware path (VDPBF16PS or AMX,
// GPTLAB_BF16 not off). It then takes, shape by shape, the path its
// calibration measured fastest (or the one GPTLAB_BF16 forces): a shape on
// widen is internal/sgemm on the float32 operands as the cast step runs
// it, so nothing is lost where the hardware path is slower. Without a
// hardware path the casts' float32 temporaries go to the model's BLAS.
func useGemm16() bool {
	if gemm16Override != 0 {
		return gemm16Override > 0
	}
	return len(bf16gemm.Paths()) > 1
}

// GEMMPath says how the linear layers of a model built under policy p
// multiply: "sgemm" (float32 operands, rounded to p's format when it is
// 16-bit), or "bf16gemm/" and bf16gemm's mode: "auto" (each shape on the
// path its calibration chose, bf16gemm.Choices) or the forced path.
func GEMMPath(p precision.Policy) string {
	if storage(p.Weights) == arena.BF16 && storage(p.Activations) == arena.BF16 && useGemm16() {
		return "bf16gemm/" + bf16gemm.Mode()
	}
	return "sgemm"
}

// output rounds an op output x of the forward to the storage format: the
// 16-bit copy where x is produced, and the cast up that x's readers get
// in its place. The loss and views are x.
func (mp *mixed) output(x *G.Node) (*G.Node, error) {
	if mp.act == arena.F32 || x == nil || x.Dtype() != tensor.Float32 {
		return x, nil
	}
	if ops.IsCrossEntropy(x.Op()) { // the loss
		return x, nil
	}
	if op, ok := x.Op().(arena.Viewer); ok && op.IsView() {
		return x, nil // its input is stored already
	}
	x16, up, err := castPair(x, mp.act)
	if err != nil {
		return nil, err
	}
	mp.stored[x], mp.stored[up] = x16, x16
	return up, nil
}

// weight is the parameter node w as a matrix product reads it: under a
// policy with 16-bit weights, the cast up of its 16-bit copy (made once
// per graph); otherwise w.
func (mp *mixed) weight(w *G.Node) (*G.Node, error) {
	if mp.wt == arena.F32 {
		return w, nil
	}
	if up, ok := mp.weights[w]; ok {
		return up, nil
	}
	w16, up, err := castPair(w, mp.wt)
	if err != nil {
		return nil, err
	}
	mp.weights[w], mp.stored[up], mp.copies[w16] = up, w16, true
	return up, nil
}

// castPair is x cast down to the 16-bit type to, and that cast back up.
func castPair(x *G.Node, to arena.Dtype) (low, up *G.Node, err error) {
	if low, err = arena.Cast(x, arena.F32, to); err != nil {
		return nil, nil, err
	}
	up, err = arena.Cast(low, to, arena.F32)
	return low, up, err
}

// matmul is x·wᵀ for a weight w [out, in] with w read rounded (weight),
// on internal/bf16gemm on the bf16 speed path. The product itself is not
// rounded: a linear layer is one op (x·Wᵀ + b, as torch's addmm), whose
// output is rounded once, after the bias (output).
func (mp *mixed) matmul(x, w *G.Node) (*G.Node, error) {
	w, err := mp.weight(w)
	if err != nil {
		return nil, err
	}
	mul := arena.MatMul
	if mp.gemm16 {
		mul = ops.Gemm16
	}
	return mul(x, w, false, true) // (N, out)
}

// copyOf is the 16-bit copy a stored value (an op output or its cast up,
// a weight's cast up) is kept as, or nil.
func (mp *mixed) copyOf(x *G.Node) *G.Node { return mp.stored[x] }

// read is what the backward reads for the forward value x: for a stored
// value (an op output or its cast up, a weight's cast up), a cast up of
// its 16-bit copy through an alias of its own (so gorgonia does not merge
// it with the forward's cast up, whose float32 temporary must die in the
// forward), made at the first backward op that reads it and shared by the
// others; anything else (inputs, parameters, masks) is read as it is.
func (mp *mixed) read(x *G.Node) (*G.Node, error) {
	x16, ok := mp.stored[x]
	if !ok {
		return nil, nil
	}
	if up, ok := mp.back[x16]; ok {
		return up, nil
	}
	a, err := arena.Alias(x16, backTag)
	if err != nil {
		return nil, err
	}
	up, err := arena.Cast(a, x16.Op().(arena.CastOp).To, arena.F32)
	if err != nil {
		return nil, err
	}
	mp.back[x16] = up
	return up, nil
}
