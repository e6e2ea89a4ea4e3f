package ops

import "math"

// expFast is e^x for the float32 kernels, in float64: x = (32m + j)·ln2/32
// + r with |r| <= ln2/64, e^x = 2^m · 2^(j/32) · p(r) with 2^(j/32) from a
// table and p the degree-3 Taylor polynomial (truncation error r^4/4! <
// 6e-10 relative, a hundredth of a float32 ulp). The kernels only take e^x
// of x <= 0 (a value minus a maximum, -x²/2): x must not exceed 700; below
// -700 it is clamped, so the result stays a normal float64 (it rounds to 0
// as a float32 where e^x does); NaN stays NaN. Small enough to be inlined
// into the kernels' loops, with no branch.
func expFast(x float64) float64 {
	const (
		invStep = 32 / math.Ln2
		step    = math.Ln2 / 32
		magic   = 0x1.8p52           // adding it rounds to an integer: kf = magic + k
		bits    = 0x4338000000000000 // math.Float64bits(magic)
	)
	x = max(x, -700)
	kf := x*invStep + magic
	k := int64(math.Float64bits(kf) - bits)
	// |k| < 2^15, so the rounding of step costs at most 1e-13 in r.
	r := x - (kf-magic)*step
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6)))
	// k>>5 is an arithmetic shift: floor division, k&31 in [0, 32).
	return p * exp2Table[k&31] * math.Float64frombits(uint64(k>>5+1023)<<52)
}

// exp2Table[j] = 2^(j/32).
var exp2Table = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return t
}()
