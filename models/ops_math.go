package models

import (
	"math"
	"runtime"
	"sync"
)

// expFast is e^x for the float32 kernels, in float64: x = (32m + j)·ln2/32
// + r with |r| <= ln2/64, e^x = 2^m · 2^(j/32) · p(r) with 2^(j/32) from a
// table and p the degree-4 Taylor polynomial (truncation error r^5/5! <
// 1.3e-12 relative). Below -87.3 (where float32 e^x is subnormal) it
// returns 0, above 88.7 +Inf. Far cheaper than math.Exp, exact to float32
// rounding.
func expFast(x float64) float64 {
	const (
		invStep = 32 / math.Ln2
		stepHi  = 6.93147180369123816490e-01 / 32 // ln2/32 split in two for an exact reduction
		stepLo  = 1.90821492927058770002e-10 / 32
	)
	if x < -87.3 {
		return 0
	}
	if x > 88.7 {
		return math.Inf(1)
	}
	// k = round(x/step) by the 1.5·2^52 trick: adding it leaves the
	// rounded integer in the low mantissa bits (no call to math.Floor).
	const magic = 0x1.8p52
	kf := x*invStep + magic
	k := int64(int32(uint32(math.Float64bits(kf))))
	kf -= magic
	r := x - kf*stepHi - kf*stepLo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24))))
	m, j := k>>5, k&31 // arithmetic shift: floor division, j in [0, 32)
	return p * exp2Table[j] * math.Float64frombits(uint64(m+1023)<<52)
}

// exp2Table[j] = 2^(j/32).
var exp2Table = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return t
}()

// parallelMinWork is the work (elements touched) below which a kernel
// runs on the calling goroutine.
const parallelMinWork = 1 << 15

// parallelRows runs f over [0, rows) split into contiguous ranges, one per
// available CPU, when rows*rowWork is large enough to pay for goroutines.
// Callers only use it for kernels whose rows are independent, so results
// do not depend on the split (no cross-row reductions).
func parallelRows(rows, rowWork int, f func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	if p < 2 || rows < 2 || rows*rowWork < parallelMinWork {
		f(0, rows)
		return
	}
	if p > rows {
		p = rows
	}
	var wg sync.WaitGroup
	chunk := (rows + p - 1) / p
	for lo := chunk; lo < rows; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(lo, min(lo+chunk, rows))
	}
	f(0, min(chunk, rows))
	wg.Wait()
}
