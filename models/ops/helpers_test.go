package ops

import (
	"testing"

	"gonum.org/v1/gonum/blas/gonum"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/sgemm"
	"gptlab/planner/arena"
)

// onEachBLAS runs f with gonum's BLAS (the causal products by blocks of
// causalRows rows) and with gptlab's sgemm (its causal products), the
// BLAS restored after.
func onEachBLAS(t *testing.T, f func(t *testing.T)) {
	defer G.Use(tensor.WhichBLAS())
	for _, b := range []struct {
		name string
		impl G.BLAS
	}{{"gonum", gonum.Implementation{}}, {"sgemm", sgemm.Implementation{}}} {
		G.Use(b.impl)
		t.Run(b.name, f)
	}
}

// prod is the number of elements of shape s.
func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// runOp binds op to out and in, runs it once and returns out; a bind
// error fails tb.
func runOp(tb testing.TB, op binder, out arena.Buf, in ...arena.Buf) arena.Buf {
	tb.Helper()
	f, err := op.bind(out, in)
	if err != nil {
		tb.Fatal(err)
	}
	f()
	return out
}
