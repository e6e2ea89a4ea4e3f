package ops

import (
	"gptlab/internal/bf16gemm"
	"gptlab/internal/par"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// causal16.go: the causal products reading their operands as bf16 bits
// (arena.BF16Reader), so that the bf16 policy's attention runs no cast up
// of q, k, v, the probabilities or their gradients: each item's operands
// are widened, exactly, into scratch of its chunk, and the float32
// products run there, with the same bits as on the casts' float32 copies.
// With BF16Products they multiply on bf16 operands instead (bind16): the
// float32 ones rounded into the chunk's scratch, the bf16 ones read in
// place.

// ReadsBF16 implements arena.BF16Reader: either operand of a causal
// product may be bf16 bits (causalReader).
func (causalOp) ReadsBF16(int) bool { return true }

// causalReader hands the causal products each item's operands: from a
// float32 input as they are, from a bf16 one widened into a chunk's
// scratch.
type causalReader struct {
	op       causalOp
	T, d     int
	x, y     []float32 // the inputs held as float32 (nil where bf16)
	x16, y16 []uint16  // the inputs held as bf16 bits (nil where float32)
}

func newCausalReader(op causalOp, T, d int, in []arena.Buf) causalReader {
	r := causalReader{op: op, T: T, d: d, x: in[0].F32, y: in[1].F32}
	if in[0].Is(arena.BF16) {
		r.x, r.x16 = nil, in[0].U16
	}
	if in[1].Is(arena.BF16) {
		r.y, r.y16 = nil, in[1].U16
	}
	return r
}

// square reports whether input k (0: x, 1: y) is the (N, T, T) operand
// of CausalApply or causalApplyT.
func (r causalReader) square(k int) bool { return k == 0 && !r.op.kind.scores() }

// extent is how many values one widening of input k spans: a (T, T) item,
// a (T, d) item, or with heads the (T, H·d) rows of a sequence, which its
// H items share (widened once for consecutive items of the sequence).
func (r causalReader) extent(k int) int {
	switch {
	case r.square(k):
		return r.T * r.T
	case r.op.heads.H > 0:
		return r.T * r.op.heads.H * r.d
	}
	return r.T * r.d
}

// scratch is the scratch a chunk needs, in elements: room for each
// input's conversion, into float32 the bf16 inputs (wide) or into bf16
// the float32 ones.
func (r causalReader) scratch(wide bool) int {
	n := 0
	for k, bits := range [2]bool{r.x16 != nil, r.y16 != nil} {
		if bits == wide {
			n += r.extent(k)
		}
	}
	return n
}

// causalChunk is one chunk's view of the inputs as E (float32, or bf16
// bits): its scratch for the inputs held the other way, and which
// sequence each input's scratch holds (-1: none yet).
type causalChunk[E uint16 | float32] struct {
	r    causalReader
	w    [2][]E
	held [2]int
}

// chunk starts a chunk's call on scratch w (scratch(E is float32) long):
// the conversions of an earlier call or run are stale.
func chunkOf[E uint16 | float32](r causalReader, w []E) causalChunk[E] {
	c := causalChunk[E]{r: r, held: [2]int{-1, -1}}
	for k := range 2 {
		if c.own(k) == nil {
			c.w[k], w = w[:r.extent(k)], w[r.extent(k):]
		}
	}
	return c
}

// own is input k as the reader holds it, if that is as E (else nil).
func (c *causalChunk[E]) own(k int) []E {
	var x any = c.r.x
	if k == 1 {
		x = c.r.y
	}
	if _, bits := any(c.w[0]).([]uint16); bits {
		x = c.r.x16
		if k == 1 {
			x = c.r.y16
		}
	}
	return x.([]E)
}

// operand is item i's part of input k as E from its first element, and
// its row stride: in place where the input is held as E, else converted
// (exactly, or rounded to nearest even into bf16) into the chunk's
// scratch: a (T, T) item, a (T, d) item of its own, or with heads the
// rows of the item's sequence, converted once while consecutive items of
// the sequence read them.
func (c *causalChunk[E]) operand(k, i int) ([]E, int) {
	r := c.r
	T, d := r.T, r.d
	if x := c.own(k); x != nil {
		if r.square(k) {
			return x[i*T*T : (i+1)*T*T], T
		}
		return mat(r.op.heads, x, i, T, d)
	}
	w, n := c.w[k], r.extent(k)
	convert := func(lo int) {
		switch w := any(w).(type) {
		case []float32:
			x16 := r.x16
			if k == 1 {
				x16 = r.y16
			}
			precision.DecodeBF16(w, x16[lo:lo+n])
		case []uint16:
			x := r.x
			if k == 1 {
				x = r.y
			}
			precision.EncodeBF16(w, x[lo:lo+n])
		}
	}
	if r.square(k) || r.op.heads.H == 0 {
		convert(i * n)
		return w, n / T
	}
	b, h := i/r.op.heads.H, i%r.op.heads.H
	if c.held[k] != b {
		convert(b * n)
		c.held[k] = b
	}
	ld := n / T
	return w[h*d : h*d+(T-1)*ld+d], ld
}

// item is item i's operands and its part of the output z.
func (c *causalChunk[E]) item(i int, z []float32) causalItem[E] {
	var o causalItem[E]
	o.a, o.lda = c.operand(0, i)
	o.b, o.ldb = c.operand(1, i)
	T, d := c.r.T, c.r.d
	if c.r.op.kind.scores() {
		o.c, o.ldc = z[i*T*T:(i+1)*T*T], T
	} else {
		o.c, o.ldc = mat(c.r.op.heads, z, i, T, d)
	}
	return o
}

// CausalOption is an option of the causal ops' constructors.
type CausalOption func(*causalOp)

// BF16Products makes a causal op multiply as the bf16 policy's matrix
// products do: its operands rounded to bf16 (to nearest even: the
// policy's stored values are bf16 already, the scores' gradient that
// CausalProbs' backward hands on is not), summed in float32, on
// internal/bf16gemm's causal products (VDPBF16PS where its calibration
// times it faster on the items' size, else float32 products of the
// rounded operands). The gradients it builds multiply so too.
func BF16Products() CausalOption { return func(op *causalOp) { op.bf16 = true } }

// GradientsIn makes CausalProbs round its scores' gradient to the 16-bit
// storage type d (arena.BF16 or FP16), cast down and back up, as a 16-bit
// policy rounds the gradient of every value it stores: the scores the op
// fuses are one the unfused graph (CausalScores, then CausalSoftmax) would
// store, and torch.autocast's bf16 scores are (the softmax's input
// gradient reaches their matmul's backward in bf16). The backward's
// products then read the 16-bit value.
func GradientsIn(d arena.Dtype) CausalOption { return func(op *causalOp) { op.grad16 = d } }

// bind16 is bind for an op with BF16Products: each chunk's items read as
// bf16 bits (the float32 inputs rounded into the chunk's scratch) and
// multiplied on the causal products bf16gemm chose for their size.
func (op causalOp) bind16(out arena.Buf, in []arena.Buf, N, T, d int) (func(), error) {
	kind := map[causalKind]bf16gemm.CausalKind{causalScores: bf16gemm.CausalABt, causalProbs: bf16gemm.CausalABt,
		causalApply: bf16gemm.CausalLB, causalApplyT: bf16gemm.CausalLtB}[op.kind]
	ck := bf16gemm.CausalFor(kind, T, d)
	r := newCausalReader(op, T, d, in)
	per := r.scratch(false)
	z := out.F32
	var split *par.Split
	var bits []uint16 // each chunk's rounded float32 operands
	split = par.New(N, causalItemSize(op, T, d), func(lo, hi int) {
		c := chunkOf(r, bits[split.ChunkOf(lo)*per:][:per])
		for i := lo; i < hi; i++ {
			lowerItem(op, T, d, c.item(i, z), causalProducts[uint16](ck))
		}
	})
	bits = make([]uint16, split.Chunks()*per)
	return split.Run, nil
}

// BF16Native implements arena.BF16Native: with BF16Products the op
// computes on the bf16 bits themselves, so the arena hands it the stored
// bits rather than a float32 value rounded in place, which it would
// narrow again item by item (the baby bf16 step 0.983x and 0.991x, two
// in-process runs of 40 rounds on a 2-vCPU Zen 5).
func (op causalOp) BF16Native(int) bool { return op.bf16 }
