package arena

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// ReshapeOp views its input in another shape of the same size: a Viewer,
// so in the arena nothing runs and no storage is planned (the input's
// lifetime covers the view's readers). Under the TapeMachine its Do
// returns a tensor on the input's own storage, as a view is.
type ReshapeOp struct {
	opBase
	From, To tensor.Shape
	// Tag tells apart views of one value that must stay distinct nodes
	// (Alias): gorgonia merges nodes of equal op and inputs.
	Tag int
}

// Reshape is the node x viewed as shape to.
func Reshape(x *gorgonia.Node, to ...int) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(ReshapeOp{From: x.Shape().Clone(), To: tensor.Shape(to).Clone()}, x)
}

// Alias is a view of x in its own shape that is a node of its own, told
// apart from other aliases of x by tag: a recomputation reads its input
// through one, so that gorgonia does not merge the recomputed ops with
// the first pass's (equal ops on equal inputs are one node to it).
func Alias(x *gorgonia.Node, tag int) (*gorgonia.Node, error) {
	return gorgonia.ApplyOp(ReshapeOp{From: x.Shape().Clone(), To: x.Shape().Clone(), Tag: tag}, x)
}

// Name is the op's kind.
func (ReshapeOp) Name() string { return "Reshape" }
func (op ReshapeOp) String() string {
	if op.Tag != 0 {
		return fmt.Sprintf("Alias%v#%d", op.To, op.Tag)
	}
	return fmt.Sprintf("Reshape%v→%v", op.From, op.To)
}
func (ReshapeOp) Arity() int { return 1 }
func (op ReshapeOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(tensorType(len(op.From), a), tensorType(len(op.To), a))
}

// IsView implements Viewer.
func (ReshapeOp) IsView() bool { return true }

func (op ReshapeOp) check(s tensor.Shape) error {
	if s.TotalSize() != op.To.TotalSize() {
		return fmt.Errorf("%v: input %v has %d elements, want %d", op, s, s.TotalSize(), op.To.TotalSize())
	}
	return nil
}

func (op ReshapeOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	if err := op.check(shapesOf(in)[0]); err != nil {
		return nil, err
	}
	return op.To.Clone(), nil
}

func (op ReshapeOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	if err := op.check(in[0].Shape()); err != nil {
		return nil, err
	}
	d, ok := in[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%v: input %T, want a dense tensor", op, in[0])
	}
	v := d.ShallowClone()
	if err := v.Reshape(op.To...); err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	return v, nil
}

func (op ReshapeOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op ReshapeOp) Hashcode() uint32      { return hashString(op.String()) }
func (ReshapeOp) DiffWRT(int) []bool       { return []bool{true} }

// SymDiff: the gradient viewed back in the input's shape.
func (op ReshapeOp) SymDiff(in gorgonia.Nodes, out, grad *gorgonia.Node) (gorgonia.Nodes, error) {
	d, err := Reshape(grad, in[0].Shape()...)
	return gorgonia.Nodes{d}, err
}
