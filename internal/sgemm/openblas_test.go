//go:build openblas && cgo

package sgemm

import (
	"testing"

	"gptlab/internal/sgemm/openblas"
)

func init() {
	benchImpls = append(benchImpls, benchImpl{name: "openblas", impl: openblas.Implementation{}, setThreads: openblas.SetThreads})
}

// TestOpenBLAS checks the OpenBLAS Implementation against the naive loop.
func TestOpenBLAS(t *testing.T) {
	for _, s := range []shape{{7, 13, 29}, {64, 32, 64}, {1, 1, 0}} {
		for form := 0; form < 4; form++ {
			aT, bT := form&1 == 1, form&2 == 2
			o := newOperands(uint64(form), s, aT, bT, 1.5, 0.5, 1)
			want, mag := o.naive()
			openblas.Implementation{}.Sgemm(blasTrans(aT), blasTrans(bT), o.m, o.n, o.k, o.alpha, o.a, o.lda, o.b, o.ldb, o.beta, o.c, o.ldc)
			if err := o.check(o.c, want, mag); err != nil {
				t.Errorf("OpenBLAS Sgemm(%s%s, %v): %v", transName(aT), transName(bT), s, err)
			}
		}
	}
}
