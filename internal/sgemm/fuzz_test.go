package sgemm

import "testing"

// FuzzSgemm compares the active kernel, serial and split across goroutines,
// with the naive triple loop on small random problems.
func FuzzSgemm(f *testing.F) {
	f.Add(uint8(7), uint8(13), uint8(29), uint8(0), int8(2), int8(0), uint8(0), uint64(1))
	f.Add(uint8(6), uint8(16), uint8(8), uint8(3), int8(-3), int8(1), uint8(2), uint64(2))
	f.Add(uint8(25), uint8(9), uint8(1), uint8(1), int8(1), int8(4), uint8(1), uint64(3))
	f.Add(uint8(1), uint8(40), uint8(17), uint8(2), int8(0), int8(-2), uint8(0), uint64(4))
	f.Fuzz(func(t *testing.T, m, n, k, form uint8, alpha, beta int8, pad uint8, seed uint64) {
		s := shape{int(m % 41), int(n % 41), int(k % 41)}
		aT, bT := form&1 == 1, form&2 == 2
		o := newOperands(seed, s, aT, bT, float32(alpha)/2, float32(beta)/2, int(pad%4))
		want, mag := o.naive()
		c0 := o.c
		for _, threads := range []int{1, 2} {
			func() {
				defer SetThreads(SetThreads(threads))
				defer SetParallelFlops(SetParallelFlops(0))
				o.c = append([]float32(nil), c0...)
				Implementation{}.Sgemm(blasTrans(aT), blasTrans(bT), o.m, o.n, o.k, o.alpha, o.a, o.lda, o.b, o.ldb, o.beta, o.c, o.ldc)
				if err := o.check(o.c, want, mag); err != nil {
					t.Fatalf("threads=%d Sgemm(%s%s, %v, alpha=%v beta=%v): %v", threads, transName(aT), transName(bT), s, o.alpha, o.beta, err)
				}
			}()
		}
	})
}
