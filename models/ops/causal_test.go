package ops

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"gptlab/planner/arena"
)

// TestCausalKernelsMatchReference: the blocked float32 kernels of the three
// causal products equal the float64 definition, over T spanning partial
// blocks; l is zero above its diagonal, as the scores and probabilities
// these kernels write are (exactly +0, checked here too).
func TestCausalKernelsMatchReference(t *testing.T) { onEachBLAS(t, testCausalKernelsMatchReference) }

func testCausalKernelsMatchReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, T := range []int{1, 7, causalRows, causalRows + 1, 2*causalRows + 5} {
		for _, kind := range []causalKind{causalScores, causalApply, causalApplyT, causalProbs} {
			op := causalOp{kind: kind, scale: 0.4}
			const N, d = 3, 6
			xs := tensor.Shape{N, T, d}
			if !kind.scores() {
				xs = tensor.Shape{N, T, T}
			}
			ys := tensor.Shape{N, T, d}
			out, _ := op.check([]tensor.Shape{xs, ys})
			x32, y32 := make([]float32, xs.TotalSize()), make([]float32, ys.TotalSize())
			x64, y64 := make([]float64, len(x32)), make([]float64, len(y32))
			for i := range x32 {
				x32[i] = float32(r.NormFloat64())
				if row, col := i/T%T, i%T; !kind.scores() && col > row {
					x32[i] = 0
				}
				x64[i] = float64(x32[i])
			}
			for i := range y32 {
				y32[i] = float32(r.NormFloat64())
				y64[i] = float64(y32[i])
			}
			want := make([]float64, out.TotalSize())
			op.reference(want, x64, y64, N, T, d)
			got := make([]float32, out.TotalSize())
			for i := range got {
				got[i] = float32(math.NaN()) // every element must be written
			}
			run, err := op.bind(arena.Buf{Dtype: arena.F32, F32: got, Shape: out},
				[]arena.Buf{{Dtype: arena.F32, F32: x32, Shape: xs}, {Dtype: arena.F32, F32: y32, Shape: ys}})
			if err != nil {
				t.Fatal(err)
			}
			run()
			for i, w := range want {
				if d := math.Abs(float64(got[i]) - w); !(d <= 1e-4*(1+math.Abs(w))) {
					t.Fatalf("%v T=%d: element %d = %v, want %v", op, T, i, got[i], w)
				}
				if kind.scores() && i%T > i/T%T && math.Float32bits(got[i]) != 0 {
					t.Fatalf("%v T=%d: element %d above the diagonal = %v, want +0", op, T, i, got[i])
				}
			}
		}
	}
}

// TestCausalProbsIsScoresThenSoftmax: the fused op gives the bits of
// CausalScores followed by CausalSoftmax, run as two kernels, over T
// spanning partial blocks; the output buffer's previous
// contents (NaN) never leak. A scale one float32 ulp off differs (the control).
func TestCausalProbsIsScoresThenSoftmax(t *testing.T) {
	onEachBLAS(t, testCausalProbsIsScoresThenSoftmax)
}

func testCausalProbsIsScoresThenSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const scale = 0.17677669529663687
	for _, T := range []int{1, 5, causalRows - 1, causalRows, 3*causalRows + 7} {
		const N, d = 9, 32
		qs, ts := tensor.Shape{N, T, d}, tensor.Shape{N, T, T}
		q, k := make([]float32, qs.TotalSize()), make([]float32, qs.TotalSize())
		for i := range q {
			q[i], k[i] = float32(3*r.NormFloat64()), float32(3*r.NormFloat64())
		}
		in := []arena.Buf{{Dtype: arena.F32, F32: q, Shape: qs}, {Dtype: arena.F32, F32: k, Shape: qs}}
		buf := func() arena.Buf {
			b := arena.Buf{Dtype: arena.F32, F32: make([]float32, ts.TotalSize()), Shape: ts}
			for i := range b.F32 {
				b.F32[i] = float32(math.NaN())
			}
			return b
		}
		s, want := buf(), buf()
		run := func(op binder, out arena.Buf, in []arena.Buf) {
			t.Helper()
			f, err := op.bind(out, in)
			if err != nil {
				t.Fatal(err)
			}
			f()
		}
		run(causalOp{kind: causalScores}, s, in)
		run(causalSoftmaxOp{scale: scale}, want, []arena.Buf{s})
		for _, tc := range []struct {
			name  string
			scale float64
			same  bool
		}{{"fused", scale, true}, {"scale one float32 ulp off", float64(math.Nextafter32(scale, 1)), false}} {
			got := buf()
			run(causalOp{kind: causalProbs, scale: tc.scale}, got, in)
			if same := slices.Equal(math32bits(got.F32), math32bits(want.F32)); same != tc.same && T > 1 { // one key: p = 1 at any scale
				t.Errorf("T=%d %s: bitwise equal to scores then softmax: %v, want %v", T, tc.name, same, tc.same)
			}
		}
	}
}

// math32bits is the bits of each element (NaNs compare equal by bits).
func math32bits(x []float32) []uint32 {
	b := make([]uint32, len(x))
	for i, v := range x {
		b[i] = math.Float32bits(v)
	}
	return b
}

// TestCausalSoftmaxBackward32 checks the float32 kernel bitwise against
// the generic loop it replaces (dot4's order), over and beside its inputs.
func TestCausalSoftmaxBackward32(t *testing.T) {
	const N, T, scale = 5, 37, 0.17677669529663687
	y, dy := benchData(N*T*T), benchData(N*T*T + 1)[1:]
	for i := range y {
		y[i] = float32(math.Abs(float64(y[i]))) / T
	}
	want := make([]float32, len(y))
	causalSoftmaxBackward(want, y, dy, T, 3, scale)
	for _, alias := range []string{"", "y", "dy"} {
		yc, dyc := slices.Clone(y), slices.Clone(dy)
		got := make([]float32, len(y))
		switch alias {
		case "y":
			got = yc
		case "dy":
			got = dyc
		}
		causalSoftmaxBackward32(got, yc, dyc, T, 3, scale)
		if j := bitsEqual(got, want); j >= 0 {
			t.Fatalf("over %q: [%d] = %v, the generic loop %v", alias, j, got[j], want[j])
		}
	}
}
