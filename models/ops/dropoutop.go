package ops

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/internal/vec"
	"gptlab/planner/arena"
)

// DropoutKey is the part of the masks' counters that changes from run to
// run: the seed and the training step. The ops of a site hold a pointer
// to it and read it when they run, so the caller sets it before each run
// and the graph is built once.
type DropoutKey struct{ Seed, Step int64 }

// DropoutSite is one dropout mask: probability P (in [0, 1)) at the
// model's place (Layer, Site) (site below 256), keyed by *Key when it is
// drawn. Its mask over n elements is DropoutMask's for (P, Key.Seed,
// Key.Step, Layer, Site), row-major, from element First on: a tensor
// holding part of a batch (its later sequences) takes the elements of
// the whole batch's mask where its values sit in the whole.
type DropoutSite struct {
	Key         *DropoutKey
	P           float64
	Layer, Site int
	First       int
}

func (s DropoutSite) check() error {
	if s.Key == nil || !(s.P >= 0 && s.P < 1) || s.Site < 0 || s.Site > 255 || s.Layer < 0 || s.First < 0 {
		return fmt.Errorf("dropout site %v: want a key, p in [0, 1), a layer ≥ 0, a site in [0, 256) and a first element ≥ 0", s)
	}
	return nil
}

func (s DropoutSite) String() string {
	if s.First > 0 {
		return fmt.Sprintf("p=%v, layer %d, site %d, from %d", s.P, s.Layer, s.Site, s.First)
	}
	return fmt.Sprintf("p=%v, layer %d, site %d", s.P, s.Layer, s.Site)
}

// mulAt sets dst = x ⊙ m for elements first, first+1, … of the site's
// mask m (counted from s.First) under the current key (dst may be x): a
// product split into pieces, by any goroutines, is the whole product.
func (s DropoutSite) mulAt(dst, x []float32, first int) {
	// drop when the top 24 bits, as a fraction of 2^24, fall below p.
	thresh := uint32(s.P * (1 << 24))
	k := dropoutKey(s.Key.Seed, s.Key.Step, s.Layer, s.Site) + uint64(s.First+first)*golden64
	vec.DropoutMul(dst, x, k, thresh, float32(1/(1-s.P)))
}

// Dropout is x ⊙ m, m the site's mask of x's shape drawn in the kernel
// that multiplies by it (vec.DropoutMul): no mask is written to memory,
// and the product is bitwise that with DropoutMask's mask in memory
// (TestDropoutOp). Its gradient is Dropout(g, s), the same mask.
// Elementwise, any shape; float64 values multiply by the float32 mask's
// values.
func Dropout(x *G.Node, s DropoutSite) (*G.Node, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return G.ApplyOp(dropoutOp{site: s}, x)
}

// DropoutSiteOf is the site of a Dropout node's op (ok false for any
// other op).
func DropoutSiteOf(op G.Op) (s DropoutSite, ok bool) {
	d, ok := op.(dropoutOp)
	return d.site, ok
}

type dropoutOp struct {
	opBase
	site DropoutSite
}

func (dropoutOp) Arity() int { return 1 }
func (dropoutOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (op dropoutOp) check(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	return in[0].Clone(), nil
}
func (op dropoutOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return op.check(shapesOf(in))
}
func (op dropoutOp) Do(in ...G.Value) (G.Value, error) {
	return op.UsePreallocDo(newLike(in[0], in[0].Shape()), in...)
}
func (op dropoutOp) UsePreallocDo(out G.Value, in ...G.Value) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%v: %d inputs, want 1", op, len(in))
	}
	o, err := checkPrealloc(op.String(), out, in[0].Shape(), in[0].Dtype())
	if err != nil {
		return nil, err
	}
	if y, ok := o.Data().([]float64); ok {
		x := in[0].Data().([]float64)
		m := make([]float32, len(x))
		DropoutMask(m, op.site.P, op.site.Key.Seed, op.site.Key.Step, op.site.Layer, op.site.Site)
		for i, v := range x {
			y[i] = v * float64(m[i])
		}
		return o, nil
	}
	return runFloat32(op, op.String(), o, in)
}

// BindKernel implements arena.Kernel.
func (op dropoutOp) BindKernel(out arena.Buf, in []arena.Buf) (func(), bool) {
	return bindKernel(op, out, in)
}

// InPlaceInputs implements arena.InPlacer: y[i] depends on x[i] alone.
func (dropoutOp) InPlaceInputs() []int { return []int{0} }

// dropoutGrain is the elements of one row of a Dropout split.
const dropoutGrain = 4096

func (op dropoutOp) bind(out arena.Buf, in []arena.Buf) (func(), error) {
	if err := checkBind(op, out, in); err != nil {
		return nil, err
	}
	y, x := out.F32, in[0].F32
	n := len(y)
	return par.New((n+dropoutGrain-1)/dropoutGrain, 4*dropoutGrain, func(lo, hi int) {
		lo, hi = lo*dropoutGrain, min(hi*dropoutGrain, n)
		op.site.mulAt(y[lo:hi], x[lo:hi], lo)
	}).Run, nil
}

// Flops is one product per element (the hash is integer work).
func (dropoutOp) Flops(in []tensor.Shape) float64 { return float64(in[0].TotalSize()) }

func (op dropoutOp) WriteHash(h hash.Hash) { fmt.Fprint(h, op.String()) }
func (op dropoutOp) Hashcode() uint32      { return hashOf(op) }
func (op dropoutOp) String() string        { return fmt.Sprintf("Dropout{%v}", op.site) }
func (dropoutOp) DiffWRT(int) []bool       { return []bool{true} }
func (op dropoutOp) SymDiff(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dx, err := G.ApplyOp(op, grad)
	return G.Nodes{dx}, err
}
