package sgemm

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// countingImpl is Implementation counting its Sgemm calls.
type countingImpl struct {
	Implementation
	calls *int
}

func (c countingImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	*c.calls++
	c.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// TestUse checks that after Use gorgonia and tensor run this package's
// Sgemm, and that tensor.MatMul (plain and on transposed views) matches the
// naive triple loop.
func TestUse(t *testing.T) {
	defer gorgonia.Use(gonum.Implementation{})
	Use()
	if _, ok := tensor.WhichBLAS().(Implementation); !ok {
		t.Fatalf("after Use, tensor.WhichBLAS() = %T, want sgemm.Implementation", tensor.WhichBLAS())
	}
	if _, ok := gorgonia.WhichBLAS().(Implementation); !ok {
		t.Fatalf("after Use, gorgonia.WhichBLAS() = %T, want sgemm.Implementation", gorgonia.WhichBLAS())
	}
	calls := 0
	gorgonia.Use(countingImpl{calls: &calls})
	s := shape{37, 29, 70}
	for form := 0; form < 4; form++ {
		aT, bT := form&1 == 1, form&2 == 2
		t.Run(transName(aT)+transName(bT), func(t *testing.T) {
			o := newOperands(uint64(form), s, aT, bT, 1, 0, 0)
			want, mag := o.naive()
			view := func(x []float32, rows, cols int, tr bool) *tensor.Dense {
				if tr {
					rows, cols = cols, rows
				}
				d := tensor.New(tensor.WithShape(rows, cols), tensor.WithBacking(x)) // stored (rows, cols)
				if tr {
					d.T() // lazy transpose: a view of (cols, rows)
				}
				return d
			}
			a := view(o.a, s.m, s.k, aT) // (m, k)
			b := view(o.b, s.k, s.n, bT) // (k, n)
			before := calls
			got, err := tensor.MatMul(a, b)
			if err != nil {
				t.Fatalf("tensor.MatMul: %v", err)
			}
			if calls == before {
				t.Fatalf("tensor.MatMul did not call the installed Sgemm")
			}
			c := got.Data().([]float32) // (m, n)
			o.c = append(c[:0:0], c...)
			if err := o.check(o.c, want, mag); err != nil {
				t.Errorf("tensor.MatMul: %v", err)
			}
		})
	}
}

// Example multiplies a 2×3 matrix by the transpose of a 2×3 matrix.
func Example() {
	a := []float32{1, 2, 3, 4, 5, 6} // (2, 3)
	b := []float32{1, 0, 1, 0, 1, 0} // (2, 3), used as Bᵀ (3, 2)
	c := make([]float32, 4)          // (2, 2)
	Implementation{}.Sgemm(blas.NoTrans, blas.Trans, 2, 2, 3, 1, a, 3, b, 3, 0, c, 2)
	fmt.Println(c)
	fmt.Println(Kernel() != "")
	// Output:
	// [4 2 10 5]
	// true
}
