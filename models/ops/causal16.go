package ops

import (
	"gptlab/planner/arena"
	"gptlab/precision"
)

// causal16.go: the causal products reading their operands as bf16 bits
// (arena.BF16Reader), so that the bf16 policy's attention runs no cast up
// of q, k, v, the probabilities or their gradients: each item's operands
// are widened, exactly, into scratch of its chunk, and the float32
// products run there, with the same bits as on the casts' float32 copies.

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

// scratch is the float32 scratch a chunk needs: room for each bf16
// input's widening.
func (r causalReader) scratch() int {
	n := 0
	if r.x16 != nil {
		n += r.extent(0)
	}
	if r.y16 != nil {
		n += r.extent(1)
	}
	return n
}

// chunk is one chunk's view of the inputs: its scratch, and which
// sequence each input's scratch holds (-1: none yet).
type causalChunk struct {
	r    causalReader
	w    [2][]float32
	held [2]int
}

// chunk starts a chunk's call on scratch w (scratch() long): the
// widenings of an earlier call or run are stale.
func (r causalReader) chunk(w []float32) causalChunk {
	c := causalChunk{r: r, held: [2]int{-1, -1}}
	if r.x16 != nil {
		c.w[0], w = w[:r.extent(0)], w[r.extent(0):]
	}
	if r.y16 != nil {
		c.w[1] = w[:r.extent(1)]
	}
	return c
}

// operand is item i's part of input k from its first element, and its
// row stride.
func (c *causalChunk) operand(k, i int) ([]float32, int) {
	r := c.r
	T, d := r.T, r.d
	x32, x16 := r.x, r.x16
	if k == 1 {
		x32, x16 = r.y, r.y16
	}
	if x16 == nil {
		if r.square(k) {
			return x32[i*T*T : (i+1)*T*T], T
		}
		return mat(r.op.heads, x32, i, T, d)
	}
	w, n := c.w[k], r.extent(k)
	if r.square(k) || r.op.heads.H == 0 {
		precision.DecodeBF16(w, x16[i*n:(i+1)*n])
		return w, r.extent(k) / T
	}
	b, h := i/r.op.heads.H, i%r.op.heads.H
	if c.held[k] != b {
		precision.DecodeBF16(w, x16[b*n:(b+1)*n])
		c.held[k] = b
	}
	ld := n / T
	return w[h*d : h*d+(T-1)*ld+d], ld
}

// item is item i's operands and its part of the output z.
func (c *causalChunk) item(i int, z []float32) causalItem {
	var o causalItem
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
