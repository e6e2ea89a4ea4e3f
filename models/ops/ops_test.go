package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/testutil"
	"gptlab/internal/vec"
	"gptlab/planner/arena"
)

// opCase builds one custom op on float64 inputs of the given shapes; the
// gradient test compares gorgonia.Grad through the op with central finite
// differences of a random projection of its output.
type opCase struct {
	name   string
	shapes [][]int
	scale  []float64 // per input: spread of the random values (default 1)
	build  func(in []*G.Node) (*G.Node, error)
}

var intTargets = []int{2, 0, 4, 1, 3, 4}

func opCases() []opCase {
	return []opCase{
		{"AddBias", [][]int{{3, 4}, {4}}, nil, func(in []*G.Node) (*G.Node, error) { return AddBias(in[0], in[1]) }},
		{"LayerNorm", [][]int{{3, 5}, {5}, {5}}, nil, func(in []*G.Node) (*G.Node, error) { return LayerNorm(in[0], in[1], in[2]) }},
		{"GELU", [][]int{{4, 5}}, []float64{3}, func(in []*G.Node) (*G.Node, error) { return GELU(in[0]) }},
		{"GELU tails", [][]int{{2, 5}}, []float64{12}, func(in []*G.Node) (*G.Node, error) { return GELU(in[0]) }},
		{"CausalSoftmax", [][]int{{2, 4, 4}}, []float64{2}, func(in []*G.Node) (*G.Node, error) { return CausalSoftmax(in[0], 0.7) }},
		{"CausalScores", [][]int{{2, 5, 3}, {2, 5, 3}}, nil, func(in []*G.Node) (*G.Node, error) { return CausalScores(in[0], in[1]) }},
		{"CausalApply", [][]int{{2, 5, 5}, {2, 5, 3}}, nil, func(in []*G.Node) (*G.Node, error) { return CausalApply(in[0], in[1]) }},
		{"CausalProbsHeads", [][]int{{6, 4}, {6, 4}}, nil, func(in []*G.Node) (*G.Node, error) { return CausalProbsHeads(in[0], in[1], 3, 2, 0.7) }},
		{"CausalApplyHeads", [][]int{{4, 3, 3}, {6, 4}}, nil, func(in []*G.Node) (*G.Node, error) { return CausalApplyHeads(in[0], in[1], 2) }},
		{"Dropout", [][]int{{4, 5}}, nil, func(in []*G.Node) (*G.Node, error) {
			return Dropout(in[0], DropoutSite{Key: &DropoutKey{Seed: 3, Step: 4}, P: 0.5, Layer: 1, Site: 2})
		}},
		{"SplitHeads", [][]int{{6, 4}}, nil, func(in []*G.Node) (*G.Node, error) { return SplitHeads(in[0], 2, 3, 2) }},
		{"MergeHeads", [][]int{{4, 3, 2}}, nil, func(in []*G.Node) (*G.Node, error) { return MergeHeads(in[0], 2, 3, 2) }},
		{"CrossEntropy", [][]int{{6, 5}}, []float64{2}, func(in []*G.Node) (*G.Node, error) {
			t := tensor.New(tensor.WithShape(len(intTargets)), tensor.WithBacking(append([]int(nil), intTargets...)))
			tg := G.NewVector(in[0].Graph(), tensor.Int, G.WithShape(len(intTargets)), G.WithName("t"), G.WithValue(t))
			ce, err := CrossEntropy(in[0], tg)
			if err != nil {
				return nil, err
			}
			// a factor 3 checks that the incoming gradient is used.
			return G.Mul(ce, G.NewConstant(3.0))
		}},
	}
}

// projected returns Σ out⊙R for a fixed random R (or out itself when it is
// a scalar).
func projected(out *G.Node, rng *rand.Rand) (*G.Node, error) {
	if out.IsScalar() {
		return out, nil
	}
	s := out.Shape()
	r := make([]float64, s.TotalSize())
	for i := range r {
		r[i] = rng.NormFloat64()
	}
	R := G.NewTensor(out.Graph(), tensor.Float64, s.Dims(), G.WithShape(s.Clone()...), G.WithName("R"),
		G.WithValue(tensor.New(tensor.WithShape(s.Clone()...), tensor.WithBacking(r))))
	prod, err := G.HadamardProd(out, R)
	if err != nil {
		return nil, err
	}
	return G.Sum(prod)
}

func TestOpGradientsFiniteDifference(t *testing.T) {
	for _, tc := range opCases() {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			g := G.NewGraph()
			var ins []*G.Node
			var data [][]float64
			for i, s := range tc.shapes {
				sc := 1.0
				if tc.scale != nil {
					sc = tc.scale[i]
				}
				d := make([]float64, prod(s))
				for j := range d {
					d[j] = sc * rng.NormFloat64()
				}
				data = append(data, d)
				val := tensor.New(tensor.WithShape(s...), tensor.WithBacking(d))
				ins = append(ins, G.NewTensor(g, tensor.Float64, len(s), G.WithShape(s...), G.WithName(string(rune('a'+i))), G.WithValue(val)))
			}
			out, err := tc.build(ins)
			if err != nil {
				t.Fatal(err)
			}
			cost, err := projected(out, rng)
			if err != nil {
				t.Fatal(err)
			}
			grads, err := G.Grad(cost, ins...)
			if err != nil {
				t.Fatal(err)
			}
			vm := G.NewTapeMachine(g)
			defer vm.Close()
			run := func() float64 {
				vm.Reset()
				if err := vm.RunAll(); err != nil {
					t.Fatal(err)
				}
				return cost.Value().Data().(float64)
			}
			run()
			analytic := make([][]float64, len(ins))
			for i, gn := range grads {
				analytic[i] = append([]float64(nil), gn.Value().Data().([]float64)...)
			}
			const h = 1e-6
			worst := 0.0
			for i, d := range data {
				for j := range d {
					orig := d[j]
					d[j] = orig + h
					up := run()
					d[j] = orig - h
					down := run()
					d[j] = orig
					num := (up - down) / (2 * h)
					if diff := math.Abs(num - analytic[i][j]); diff > 1e-6*(1+math.Abs(num)) {
						t.Errorf("d cost/d input%d[%d] = %.9g, finite difference %.9g", i, j, analytic[i][j], num)
					} else {
						worst = math.Max(worst, diff)
					}
				}
			}
			t.Logf("worst |analytic - numeric| = %.3g", worst)
		})
	}
}

func TestGELUValues(t *testing.T) {
	x := []float64{-3, -1, 0, 0.5, 1, 3}
	// x*Φ(x), Φ(-3) = 0.0013498980, Φ(-1) = 0.1586552539, Φ(0.5) = 0.6914624613.
	want := []float64{-0.0040496941, -0.1586552539, 0, 0.3457312306, 0.8413447461, 2.9959503059}
	got := make([]float64, len(x))
	geluForward(got, x)
	for i := range x {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Errorf("GELU(%v) = %.10f, want %.10f", x[i], got[i], want[i])
		}
	}
	// the tanh approximation differs at x=1 by 1.6e-4: a cheap negative control.
	tanhApprox := 0.5 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(1+0.044715)))
	if math.Abs(tanhApprox-want[4]) < 1e-5 {
		t.Errorf("negative control: tanh GELU(1) = %v is indistinguishable from exact %v", tanhApprox, want[4])
	}
}

func TestCausalSoftmaxRows(t *testing.T) {
	const T = 4
	for _, tc := range []struct {
		name string
		big  float32
	}{{"ordinary", 1}, {"large scores", 1e4}} {
		t.Run(tc.name, func(t *testing.T) {
			s := make([]float32, 2*T*T)
			for i := range s {
				s[i] = tc.big * float32(i%5)
			}
			y := make([]float32, len(s))
			causalSoftmaxForward32(y, s, T, 0, 1)
			for r := 0; r < 2*T; r++ {
				i := r % T
				var sum float64
				for j := 0; j < T; j++ {
					v := y[r*T+j]
					if j > i && v != 0 {
						t.Errorf("row %d col %d above the diagonal = %v, want 0", r, j, v)
					}
					if math.IsNaN(float64(v)) {
						t.Fatalf("row %d col %d is NaN", r, j)
					}
					sum += float64(v)
				}
				if math.Abs(sum-1) > 1e-6 {
					t.Errorf("row %d sums to %v, want 1", r, sum)
				}
			}
		})
	}
}

// xentLoss32 is the float32 kernel's mean cross-entropy.
func xentLoss32(logits []float32, t []int, V int) float64 {
	loss := make([]float64, len(t))
	xentRows32(loss, logits, t, V, make([]float32, V))
	var total float64
	for _, v := range loss {
		total += v
	}
	return total / float64(len(t))
}

func TestCrossEntropyValue(t *testing.T) {
	// uniform logits over V classes give log V whatever the target.
	logits := make([]float32, 3*7)
	got := xentLoss32(logits, []int{0, 3, 6}, 7)
	if math.Abs(got-math.Log(7)) > 1e-7 {
		t.Errorf("cross-entropy of uniform logits = %v, want log 7 = %v", got, math.Log(7))
	}
	logits[3] = 1000 // row 0, class 3: a confident wrong answer
	got = xentLoss32(logits, []int{3, 3, 6}, 7)
	want := 2 * math.Log(7) / 3 // row 0 costs ~0, rows 1 and 2 log 7
	if math.Abs(got-want) > 1e-6 || math.IsInf(got, 0) {
		t.Errorf("cross-entropy with a large logit = %v, want %v", got, want)
	}
}

func TestOpsRejectBadShapes(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float32, G.WithShape(3, 4), G.WithName("x"))
	b := G.NewVector(g, tensor.Float32, G.WithShape(5), G.WithName("b"))
	if _, err := AddBias(x, b); err == nil {
		t.Errorf("AddBias((3,4), (5)) succeeded, want a shape error")
	}
	if _, err := LayerNorm(x, b, b); err == nil {
		t.Errorf("LayerNorm((3,4), (5), (5)) succeeded, want a shape error")
	}
	sq := G.NewTensor(g, tensor.Float32, 3, G.WithShape(2, 3, 4), G.WithName("s"))
	if _, err := CausalSoftmax(sq, 1); err == nil {
		t.Errorf("CausalSoftmax((2,3,4)) succeeded, want a shape error")
	}
	sq3 := G.NewTensor(g, tensor.Float32, 3, G.WithShape(2, 3, 3), G.WithName("s3"))
	for _, scale := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := CausalSoftmax(sq3, scale); err == nil {
			t.Errorf("CausalSoftmax(scale %v) succeeded, want an error", scale)
		}
	}
	if _, err := CausalSoftmax(sq3, 0.5); err != nil {
		t.Errorf("CausalSoftmax(scale 0.5): %v", err)
	}
}

// Every op, forward and backward, writes its whole output into a caller's
// buffer: UsePreallocDo into a buffer full of NaN (stale data, as in a
// reused arena) returns that buffer, holding exactly what Do returns.
func TestUsePreallocDo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	val := func(s ...int) *tensor.Dense {
		d := make([]float32, prod(s))
		for i := range d {
			d[i] = float32(rng.NormFloat64())
		}
		return tensor.New(tensor.WithShape(s...), tensor.WithBacking(d))
	}
	tg := tensor.New(tensor.WithShape(6), tensor.WithBacking([]int{1, 0, 4, 2, 3, 3}))
	x, w, dy := val(6, 4), val(4), val(6, 4)
	sq, dsq := val(2, 3, 3), val(2, 3, 3)
	heads := val(4, 3, 2)
	type preallocOp interface {
		G.Op
		G.UsePreallocDoer
	}
	for _, tc := range []struct {
		op preallocOp
		in []G.Value
	}{
		{addBiasOp{}, []G.Value{x, w}},
		{colSumOp{}, []G.Value{x}},
		{lnOp{}, []G.Value{x, w, w}},
		{lnGradXOp{}, []G.Value{x, w, dy}},
		{lnGradWOp{}, []G.Value{x, dy}},
		{geluOp{}, []G.Value{x}},
		{geluOp{grad: true}, []G.Value{x, x, dy}},
		{causalSoftmaxOp{scale: 0.5}, []G.Value{sq}},
		{causalSoftmaxOp{scale: 0.5, grad: true}, []G.Value{sq, dsq}},
		{xentOp{grad: true}, []G.Value{val(6, 5), tg, G.NewF32(2)}},
		{headsOp{B: 2, T: 3, H: 2}, []G.Value{val(6, 4)}},
		{headsOp{B: 2, T: 3, H: 2, merge: true}, []G.Value{heads}},
	} {
		t.Run(fmt.Sprint(tc.op), func(t *testing.T) {
			want, err := tc.op.Do(tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			buf := tensor.New(tensor.WithShape(want.Shape().Clone()...), tensor.Of(tensor.Float32))
			for i := range buf.Float32s() {
				buf.Float32s()[i] = float32(math.NaN())
			}
			got, err := tc.op.UsePreallocDo(buf, tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			if got != G.Value(buf) {
				t.Errorf("UsePreallocDo returned a new value, want the buffer")
			}
			if d := testutil.MaxAbsDiff(buf.Float32s(), want.(*tensor.Dense).Float32s()); d != 0 {
				t.Errorf("UsePreallocDo differs from Do by %v (stale buffer data leaked?)", d)
			}
			wrong := tensor.New(tensor.WithShape(want.Shape().TotalSize()+1), tensor.Of(tensor.Float32))
			if _, err := tc.op.UsePreallocDo(wrong, tc.in...); err == nil {
				t.Errorf("UsePreallocDo into a buffer of shape %v succeeded, want an error", wrong.Shape())
			}
		})
	}
	// the loss is a scalar: a *F32 or a one-element tensor.
	loss := G.NewF32(0)
	if _, err := (xentOp{}).UsePreallocDo(loss, val(6, 5), tg); err != nil || float32(*loss) <= 0 {
		t.Errorf("CrossEntropy into a *F32: %v, %v", *loss, err)
	}
}

// The float32 kernels (vec.GELU, vec.GELUGrad) agree with the float64
// reference kernels (math.Erf) to float32 precision.
func TestFastKernelsMatchReference(t *testing.T) {
	x := make([]float32, 0, 4001)
	for i := -2000; i <= 2000; i++ {
		x = append(x, float32(i)/200) // -10 .. 10
	}
	dy := make([]float32, len(x))
	for i := range dy {
		dy[i] = float32(math.Cos(float64(i)))
	}
	ref, fast := make([]float32, len(x)), make([]float32, len(x))
	geluForward(ref, x)
	vec.GELU(fast, x)
	if d := testutil.MaxAbsDiff(ref, fast); d > 1e-6 {
		t.Errorf("GELU float32 kernel differs from math.Erf by %g", d)
	}
	for i, v := range x {
		f := float64(v)
		ref[i] = float32(float64(dy[i]) * (0.5*math.Erfc(-f/math.Sqrt2) + f*math.Exp(-0.5*f*f)*invSqrt2Pi))
	}
	vec.GELUGrad(fast, x, dy)
	if d := testutil.MaxAbsDiff(ref, fast); d > 1e-6 {
		t.Errorf("GELU gradient float32 kernel differs from math.Erf by %g", d)
	}
}

// TestCrossEntropyOf: the two halves of a batch, each CrossEntropyOf its
// rows, add up to CrossEntropy of the whole (to float32 rounding), and
// their gradients' rows are bitwise the whole's.
func TestCrossEntropyOf(t *testing.T) {
	const N, V = 8, 5
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, N*V)
	for i := range logits {
		logits[i] = float32(r.NormFloat64())
	}
	tgt := []int{0, 4, 2, 2, 1, 3, 0, 4}
	buf := func(x []float32, s ...int) arena.Buf {
		return arena.Buf{Dtype: arena.F32, F32: x, Shape: tensor.Shape(s)}
	}
	ints := func(x []int) arena.Buf { return arena.Buf{Dtype: arena.Int, Int: x, Shape: tensor.Shape{len(x)}} }
	dloss := buf([]float32{0.75}, 1)
	run := func(op xentOp, rows []int) (float32, []float32) {
		l := buf(logits[rows[0]*V:rows[1]*V], rows[1]-rows[0], V)
		tg := ints(tgt[rows[0]:rows[1]])
		loss := buf(make([]float32, 1), 1)
		runOp(t, op, loss, l, tg)
		grad := buf(make([]float32, len(l.F32)), l.Shape...)
		runOp(t, xentOp{grad: true, of: op.of}, grad, l, tg, dloss)
		return loss.F32[0], grad.F32
	}
	whole, wantGrad := run(xentOp{}, []int{0, N})
	l0, g0 := run(xentOp{of: N}, []int{0, N / 2})
	l1, g1 := run(xentOp{of: N}, []int{N / 2, N})
	if d := math.Abs(float64(l0 + l1 - whole)); d > 1e-6 {
		t.Errorf("halves' losses %v + %v, whole %v", l0, l1, whole)
	}
	if !slices.Equal(math32bits(append(g0, g1...)), math32bits(wantGrad)) {
		t.Error("the halves' gradient rows differ from the whole batch's")
	}
	if l, _ := run(xentOp{}, []int{0, N / 2}); l == l0 { // the control: a half's own mean
		t.Errorf("CrossEntropy of a half equals its share of the whole's mean: %v", l)
	}
	// float64 (the TapeMachine's values): the halves' shares add up too
	f64 := func(op xentOp, rows []int) float64 {
		l := make([]float64, (rows[1]-rows[0])*V)
		for i := range l {
			l[i] = float64(logits[rows[0]*V+i])
		}
		out, err := op.Do(tensor.New(tensor.WithShape(rows[1]-rows[0], V), tensor.WithBacking(l)),
			tensor.New(tensor.WithShape(rows[1]-rows[0]), tensor.WithBacking(slices.Clone(tgt[rows[0]:rows[1]]))))
		if err != nil {
			t.Fatal(err)
		}
		return out.Data().([]float64)[0]
	}
	if w, h := f64(xentOp{}, []int{0, N}), f64(xentOp{of: N}, []int{0, N / 2})+f64(xentOp{of: N}, []int{N / 2, N}); math.Abs(w-h) > 1e-12 {
		t.Errorf("float64: halves' losses add up to %v, whole %v", h, w)
	}
	g := G.NewGraph()
	ln := G.NewMatrix(g, G.Float32, G.WithShape(N, V), G.WithName("logits"))
	tn := G.NewVector(g, G.Int, G.WithShape(N), G.WithName("targets"))
	if _, err := CrossEntropyOf(ln, tn, N-1); err == nil {
		t.Errorf("CrossEntropyOf %d rows as a share of %d was accepted", N, N-1)
	}
}
