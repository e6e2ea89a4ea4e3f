package ops

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
	"gptlab/planner/arena"
)

// bufOf is the arena's view of a value: its float32 or int storage and
// shape (a scalar *F32 is a one-element buffer of scalar shape).
func bufOf(t testing.TB, v G.Value) arena.Buf {
	t.Helper()
	switch x := v.(type) {
	case *tensor.Dense:
		switch d := x.Data().(type) {
		case []float32:
			return arena.Buf{Dtype: arena.F32, F32: d, Shape: x.Shape()}
		case []int:
			return arena.Buf{Dtype: arena.Int, Int: d, Shape: x.Shape()}
		}
	case *G.F32:
		return arena.Buf{Dtype: arena.F32, F32: unsafe.Slice((*float32)(x), 1), Shape: tensor.ScalarShape()}
	}
	t.Fatalf("bufOf(%T): not float32 or int storage", v)
	return arena.Buf{}
}

func bufsOf(t testing.TB, out G.Value, in []G.Value) (arena.Buf, []arena.Buf) {
	t.Helper()
	bs := make([]arena.Buf, len(in))
	for i, v := range in {
		bs[i] = bufOf(t, v)
	}
	return bufOf(t, out), bs
}

// nanBuf is a buffer of out's shape full of NaN (stale arena data).
func nanBuf(t testing.TB, out G.Value) arena.Buf {
	t.Helper()
	b := bufOf(t, out)
	f := make([]float32, len(b.F32))
	for i := range f {
		f[i] = float32(math.NaN())
	}
	return arena.Buf{Dtype: arena.F32, F32: f, Shape: b.Shape}
}

// bitsEqual reports the first index where a and b differ bitwise, or -1.
func bitsEqual(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// bindOrFail binds op's kernel.
func bindOrFail(t testing.TB, op G.Op, out arena.Buf, in []arena.Buf) func() {
	t.Helper()
	k, ok := op.(arena.Kernel)
	if !ok {
		t.Fatalf("%v does not implement arena.Kernel", op)
	}
	run, ok := k.BindKernel(out, in)
	if !ok {
		t.Fatalf("%v: BindKernel(%v, %v) refused", op, out.Shape, shapesOfBufs(in))
	}
	return run
}

// Every op's kernel, bound once into stale storage and run twice, gives
// bitwise what Do gives; so does the same kernel bound serially (no
// split), so the split does not change a bit. At baby's shapes, so GELU,
// LayerNorm and the softmax do split.
func TestKernelsMatchDo(t *testing.T) {
	for _, tc := range babyOps() {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.op.Do(tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			wantF := bufOf(t, want).F32
			_, in := bufsOf(t, want, tc.in)
			out := nanBuf(t, want)
			run := bindOrFail(t, tc.op, out, in)
			for i := range 2 {
				run()
				if j := bitsEqual(out.F32, wantF); j >= 0 {
					t.Fatalf("run %d: kernel[%d] = %v, Do %v", i, j, out.F32[j], wantF[j])
				}
			}
			prev := par.SetLimit(1)
			defer par.SetLimit(prev)
			serial := nanBuf(t, want)
			bindOrFail(t, tc.op, serial, in)()
			if j := bitsEqual(serial.F32, wantF); j >= 0 {
				t.Fatalf("serial kernel[%d] = %v, split %v", j, serial.F32[j], wantF[j])
			}
		})
	}
}

// A bound kernel allocates nothing when run.
func TestKernelsDoNotAllocate(t *testing.T) {
	for _, tc := range babyOps() {
		t.Run(tc.name, func(t *testing.T) {
			want, err := tc.op.Do(tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			_, in := bufsOf(t, want, tc.in)
			run := bindOrFail(t, tc.op, nanBuf(t, want), in)
			if n := testing.AllocsPerRun(5, run); n != 0 {
				t.Errorf("%s kernel: %v allocations per run, want 0", tc.name, n)
			}
		})
	}
	// negative control: UsePreallocDo does allocate, and AllocsPerRun sees it.
	tc := babyOps()[0]
	want, _ := tc.op.Do(tc.in...)
	if n := testing.AllocsPerRun(5, func() { tc.op.UsePreallocDo(want, tc.in...) }); n == 0 {
		t.Errorf("negative control: UsePreallocDo made no allocation")
	}
}

// Every input an op declares in-place safe may be the output's storage:
// the result is bitwise the one into separate storage. SplitHeads, which
// declares none, would not survive it (the negative control).
func TestKernelsInPlace(t *testing.T) {
	for _, tc := range babyOps() {
		ip, ok := tc.op.(arena.InPlacer)
		if !ok {
			continue
		}
		want, err := tc.op.Do(tc.in...)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range ip.InPlaceInputs() {
			t.Run(fmt.Sprintf("%s/in%d", tc.name, j), func(t *testing.T) {
				_, in := bufsOf(t, want, tc.in)
				alias := append([]float32(nil), in[j].F32...)
				in[j].F32 = alias
				out := arena.Buf{Dtype: arena.F32, F32: alias, Shape: bufOf(t, want).Shape}
				bindOrFail(t, tc.op, out, in)()
				if k := bitsEqual(alias, bufOf(t, want).F32); k >= 0 {
					t.Errorf("in place over input %d: [%d] = %v, want %v", j, k, alias[k], bufOf(t, want).F32[k])
				}
			})
		}
	}
	t.Run("negative control", func(t *testing.T) {
		for _, tc := range babyOps() {
			if tc.name != "SplitHeads" {
				continue
			}
			if _, ok := tc.op.(arena.InPlacer); ok {
				t.Fatalf("SplitHeads declares in-place inputs")
			}
			want, _ := tc.op.Do(tc.in...)
			_, in := bufsOf(t, want, tc.in)
			in[0].F32 = append([]float32(nil), in[0].F32...)
			bindOrFail(t, tc.op, arena.Buf{Dtype: arena.F32, F32: in[0].F32, Shape: bufOf(t, want).Shape}, in)()
			if bitsEqual(in[0].F32, bufOf(t, want).F32) < 0 {
				t.Errorf("SplitHeads in place gave the right answer: the in-place test cannot fail")
			}
		}
	})
}

// BindKernel declines what it cannot run: float64 storage, wrong shapes,
// missing inputs.
func TestBindKernelRejects(t *testing.T) {
	f32 := func(s ...int) arena.Buf {
		return arena.Buf{Dtype: arena.F32, F32: make([]float32, prod(s)), Shape: tensor.Shape(s)}
	}
	f64 := func(s ...int) arena.Buf {
		return arena.Buf{Dtype: arena.F64, F64: make([]float64, prod(s)), Shape: tensor.Shape(s)}
	} // not float32
	ints := arena.Buf{Dtype: arena.Int, Int: make([]int, 6), Shape: tensor.Shape{6}}
	scalar := arena.Buf{Dtype: arena.F32, F32: make([]float32, 1), Shape: tensor.Shape{1}}
	for _, tc := range []struct {
		name string
		op   arena.Kernel
		out  arena.Buf
		in   []arena.Buf
		ok   bool
	}{
		{"AddBias ok", addBiasOp{}, f32(6, 4), []arena.Buf{f32(6, 4), f32(4)}, true},
		{"AddBias float64", addBiasOp{}, f64(6, 4), []arena.Buf{f64(6, 4), f64(4)}, false},
		{"AddBias bias", addBiasOp{}, f32(6, 4), []arena.Buf{f32(6, 4), f32(5)}, false},
		{"AddBias output", addBiasOp{}, f32(4, 6), []arena.Buf{f32(6, 4), f32(4)}, false},
		{"AddBias arity", addBiasOp{}, f32(6, 4), []arena.Buf{f32(6, 4)}, false},
		{"ColSum output", colSumOp{}, f32(6), []arena.Buf{f32(6, 4)}, false},
		{"LayerNorm weight", lnOp{}, f32(6, 4), []arena.Buf{f32(6, 4), f32(6, 4), f32(4)}, false},
		{"LayerNormGradW ok", lnGradWOp{}, f32(4), []arena.Buf{f32(6, 4), f32(6, 4)}, true},
		{"GELUGrad shapes", geluOp{grad: true}, f32(6, 4), []arena.Buf{f32(6, 4), f32(6, 4), f32(4, 6)}, false},
		{"CausalSoftmax square", causalSoftmaxOp{scale: 1}, f32(2, 3, 4), []arena.Buf{f32(2, 3, 4)}, false},
		{"SplitHeads output", headsOp{B: 2, T: 3, H: 2}, f32(6, 4), []arena.Buf{f32(6, 4)}, false},
		{"CrossEntropy ok", xentOp{}, scalar, []arena.Buf{f32(6, 5), ints}, true},
		{"CrossEntropy targets", xentOp{}, scalar, []arena.Buf{f32(6, 5), f32(6)}, false},
		{"CrossEntropy output", xentOp{}, f32(6), []arena.Buf{f32(6, 5), ints}, false},
		{"CrossEntropyGrad ok", xentOp{grad: true}, f32(6, 5), []arena.Buf{f32(6, 5), ints, scalar}, true},
		{"CrossEntropyGrad dloss", xentOp{grad: true}, f32(6, 5), []arena.Buf{f32(6, 5), ints, f32(2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := tc.op.BindKernel(tc.out, tc.in); ok != tc.ok {
				t.Errorf("BindKernel(%v, %v) ok = %v, want %v", tc.out.Shape, shapesOfBufs(tc.in), ok, tc.ok)
			}
		})
	}
}

// A target outside the vocabulary: UsePreallocDo reports it, the kernel
// (which cannot return an error) panics with the row at fault.
func TestCrossEntropyKernelBadTarget(t *testing.T) {
	logits := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))
	tg := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 3}))
	if _, err := (xentOp{}).Do(logits, tg); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("Do with target 3 of V=3: err %v, want one naming row 1", err)
	}
	loss := G.NewF32(0)
	out, in := bufsOf(t, loss, []G.Value{logits, tg})
	run := bindOrFail(t, xentOp{}, out, in)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "row 1") {
			t.Errorf("kernel with target 3 of V=3: panic %v, want one naming row 1", r)
		}
	}()
	run()
}

// Two goroutines running split kernels at once (two models stepping in
// parallel) share the pool and still get their own results.
func TestKernelsConcurrent(t *testing.T) {
	ops := babyOps()
	var wg sync.WaitGroup
	for _, name := range []string{"GELU", "CausalSoftmax", "LayerNorm", "GELUGrad"} {
		for _, tc := range ops {
			if tc.name != name {
				continue
			}
			want, err := tc.op.Do(tc.in...)
			if err != nil {
				t.Fatal(err)
			}
			_, in := bufsOf(t, want, tc.in)
			out := nanBuf(t, want)
			run := bindOrFail(t, tc.op, out, in)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					clear(out.F32)
					run()
					if j := bitsEqual(out.F32, bufOf(t, want).F32); j >= 0 {
						t.Errorf("%s concurrently: [%d] = %v, want %v", name, j, out.F32[j], bufOf(t, want).F32[j])
						return
					}
				}
			}()
		}
	}
	wg.Wait()
}
