package vec

import (
	"math"
	"strconv"
	"testing"

	"gptlab/internal/testutil"
)

// The softmax benchmarks compare the primitives with scalar loops, as
// sub-benchmarks of one run ("vec", "go" = the pure-Go fallback, "scalar"
// = a plain float64 loop, math.Exp for ExpSum), so that their ratios are
// measured together. (Against the model's former scalar softmax, whose exp
// was a float64 table and polynomial, ExpSum measured 4.5-7.3x.)

// smSink keeps the benchmarks' results alive.
var (
	smSink64 float64
	smSink32 float32
)

// smBench runs the sub-benchmarks of fns in order, each with the bytes
// read and written per call; where the AVX-512 kernels run, "vec" is
// theirs and "vec-avx2" runs it again on the AVX2 kernels.
func smBench(b *testing.B, bytes int64, names []string, fns ...func()) {
	for i, f := range fns {
		run := func(name string, f func()) {
			b.Run(name, func(b *testing.B) {
				if names[i] == "vec" && !smHasAsm {
					b.Skip("no assembly kernels on this CPU/build")
				}
				b.ReportAllocs()
				b.SetBytes(bytes)
				for b.Loop() {
					f()
				}
			})
		}
		run(names[i], f)
		if names[i] == "vec" && smHasZ {
			run("vec-avx2", func() {
				softmaxZ = false
				f()
				softmaxZ = true
			})
		}
	}
}

var smNames = []string{"vec", "go", "scalar"}

func BenchmarkExpSum(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, sz := range []struct {
		name       string
		rows, cols int
	}{{"64", 1, 64}, {"65", 1, 65}, {"768x65", 768, 65}} {
		b.Run(sz.name, func(b *testing.B) {
			x := smData(1, sz.rows*sz.cols)
			y := make([]float32, len(x))
			const scale, m = 0.125, 1.5
			row := func(f func(y, x []float32)) func() {
				return func() {
					for r := range sz.rows {
						f(y[r*sz.cols:(r+1)*sz.cols], x[r*sz.cols:(r+1)*sz.cols])
					}
				}
			}
			smBench(b, int64(8*len(x)), smNames,
				row(func(y, x []float32) { smSink64 = ExpSum(y, x, scale, m) }),
				row(func(y, x []float32) {
					var acc [8]float64
					expSumGo(y, x, scale, m, &acc)
					smSink64 = sumLanes(&acc)
				}),
				row(func(y, x []float32) {
					sum := 0.0
					for j, v := range x {
						e := math.Exp(float64(v)*scale - m)
						sum += e
						y[j] = float32(e)
					}
					smSink64 = sum
				}))
		})
	}
}

func BenchmarkDot(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, n := range []int{64, 768} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			x, y := smData(2, n), smData(3, n)
			smBench(b, int64(8*n), smNames,
				func() { smSink64 = Dot(x, y) },
				func() {
					saved := softmaxAsm
					softmaxAsm = false
					smSink64 = Dot(x, y)
					softmaxAsm = saved
				},
				func() {
					s := 0.0
					for j, v := range x {
						s += float64(v) * float64(y[j])
					}
					smSink64 = s
				})
		})
	}
}

func BenchmarkMax(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, n := range []int{64, 768} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			x := smData(4, n)
			smBench(b, int64(4*n), smNames,
				func() { smSink32 = Max(x) },
				func() {
					saved := softmaxAsm
					softmaxAsm = false
					smSink32 = Max(x)
					softmaxAsm = saved
				},
				func() {
					m := x[0]
					for _, v := range x[1:] {
						m = max(m, v)
					}
					smSink32 = m
				})
		})
	}
}

func BenchmarkScale(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const n = 768
	x := smData(5, n)
	y := make([]float32, n)
	smBench(b, 8*n, smNames[:1], func() { Scale(y, x, 0.5) })
}
