package ops

import (
	"fmt"
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// The causal ops read and write their (T, d) operands (q, k, v, and the
// products with l) in one of two layouts. As items of their own, (N, T, d),
// SplitHeads' output and MergeHeads' input. Or as heads in place, the
// layout a linear layer writes: (B*T, H·d) rows whose columns h·d ..
// h·d+d-1 are head h, so that item n = b·H + h is rows b·T .. b·T+T-1 of
// head h's columns, read and written through the row stride H·d. The
// (N, T, T) operands (scores, probabilities, their gradients) are items
// in both. The products are the same products of the same values (only
// the row strides differ), so the two layouts give the same bits, and
// the heads in place need no SplitHeads and MergeHeads: the attention of
// a training step reads q, k and v where their linear layers wrote them
// and writes its output where c_proj reads it (TestCausalHeadsInPlace).
//
//	CausalProbsHeads(q, k, T, H)  (B*T, C), (B*T, C) -> (B*H, T, T)
//	CausalApplyHeads(p, v, H)     (B*H, T, T), (B*T, C) -> (B*T, C)
//	CausalAttendHeads(q, k, v, mask, T, H)    -> (B*T, C)

// CausalProbsHeads is CausalProbs with q and k read as H heads in place:
// q and k are (B*T, C) rows of B sequences of T tokens, C = H·d, and item
// b·H + h of the (B*H, T, T) probabilities is head h of sequence b.
func CausalProbsHeads(q, k *G.Node, T, H int, scale float64, opts ...CausalOption) (*G.Node, error) {
	if !(scale > 0) || math.IsInf(scale, 1) {
		return nil, fmt.Errorf("CausalProbsHeads: scale %v, want a positive finite number", scale)
	}
	if err := checkHeads("CausalProbsHeads", T, H); err != nil {
		return nil, err
	}
	return G.ApplyOp(causalOp{kind: causalProbs, scale: scale, heads: heads{H: H, T: T}}.with(opts), q, k)
}

// CausalApplyHeads is CausalApply with v and the output as H heads in
// place: l (B*H, T, T) times v (B*T, C) -> (B*T, C), item b·H + h of l
// times head h of sequence b's rows of v, into the same columns of the
// output.
func CausalApplyHeads(l, v *G.Node, H int, opts ...CausalOption) (*G.Node, error) {
	if err := checkHeads("CausalApplyHeads", 1, H); err != nil {
		return nil, err
	}
	s := l.Shape()
	if s.Dims() != 3 || s[1] < 1 {
		return nil, fmt.Errorf("CausalApplyHeads: l %v, want (B*H, T, T)", s)
	}
	return G.ApplyOp(causalOp{kind: causalApply, heads: heads{H: H, T: s[1]}}.with(opts), l, v)
}

func checkHeads(name string, T, H int) error {
	if T < 1 || H < 1 {
		return fmt.Errorf("%s: T = %d and H = %d, want both positive", name, T, H)
	}
	return nil
}

// heads is the layout of a causal op's (T, d) operands: the zero value,
// items of their own (N, T, d); H > 0, H heads in place in (B*T, H·d)
// rows of sequences of T tokens.
type heads struct{ H, T int }

func (l heads) String() string {
	if l.H == 0 {
		return ""
	}
	return fmt.Sprintf("{heads %d, T %d}", l.H, l.T)
}

// dims returns the items, their length and their width in a (T, d)
// operand of shape s (checked).
func (l heads) dims(s tensor.Shape) (N, T, d int) {
	if l.H == 0 {
		return s[0], s[1], s[2]
	}
	return s[0] / l.T * l.H, l.T, s[1] / l.H
}

// ok reports whether s is a (B*T, H·d) operand in this layout.
func (l heads) ok(s tensor.Shape) bool {
	return s.Dims() == 2 && s[0] > 0 && s[0]%l.T == 0 && s[1] > 0 && s[1]%l.H == 0
}

// check is causalOp's check of shapes x and y in a layout of heads in
// place: the output shape of a scores product of two (B*T, H·d) x and y,
// or of (B*H, T, T) x times (B*T, H·d) y.
func (l heads) check(op fmt.Stringer, scores bool, x, y tensor.Shape) (tensor.Shape, error) {
	if scores {
		if !l.ok(x) || !x.Eq(y) {
			return nil, fmt.Errorf("%v: shapes %v and %v, want (B*T, C) twice, T = %d, C a multiple of %d", op, x, y, l.T, l.H)
		}
		N, T, _ := l.dims(x)
		return tensor.Shape{N, T, T}, nil
	}
	if !l.ok(y) || x.Dims() != 3 || x[1] != l.T || x[2] != l.T || x[0] != y[0]/l.T*l.H {
		return nil, fmt.Errorf("%v: shapes %v and %v, want (B*H, T, T) and (B*T, C), T = %d, H = %d", op, x, y, l.T, l.H)
	}
	return y.Clone(), nil
}

// mat returns item i's (T, d) matrix in x, a (T, d) operand in layout l,
// from its first element to its last, and its row stride.
func mat[E any](l heads, x []E, i, T, d int) ([]E, int) {
	if l.H == 0 {
		return x[i*T*d : (i+1)*T*d], d
	}
	b, h := i/l.H, i%l.H
	ld := l.H * d
	off := b*T*ld + h*d
	return x[off : off+(T-1)*ld+d], ld
}
