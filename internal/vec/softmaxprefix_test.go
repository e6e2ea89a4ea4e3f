package vec

import (
	"fmt"
	"math"
	"testing"
)

// guarded is n elements of a fresh slice, basicGuard sentinels past them.
func guarded(n int) []float32 {
	s := make([]float32, n+basicGuard)
	for i := range s {
		s[i] = -12345.5
	}
	return s[:n]
}

// TestSoftmaxPrefixImplsAgree: SoftmaxPrefix, on every implementation
// (avx512: its one-call kernel; avx2 and go: Max, ExpSum and Scale), gives
// the bits of the three calls on the pure-Go fallbacks, for rows of 1 to
// 70 elements and longer, in rows 0 to 17 wider, in place or not, on
// logits and on rows of specials (±0, ±Inf, NaN, subnormals, a NaN or an
// Inf maximum, all zeros), and writes nothing past the row.
func TestSoftmaxPrefixImplsAgree(t *testing.T) {
	const scale = 0.17677669
	var ns []int
	for n := 1; n <= 70; n++ {
		ns = append(ns, n)
	}
	ns = append(ns, 127, 128, 129, 256, 1000)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	rows := map[string]func(n int) []float32{
		"logits":   func(n int) []float32 { return smData(uint64(n), n) },
		"specials": func(n int) []float32 { return basicData(basicRand(uint64(n)+7), n, true) },
		"zeros":    func(n int) []float32 { x := make([]float32, n); x[n-1] = float32(math.Copysign(0, -1)); return x },
		"nan max":  func(n int) []float32 { x := smData(uint64(n)+3, n); x[n/2] = nan; return x },
		"inf max":  func(n int) []float32 { x := smData(uint64(n)+5, n); x[n-1] = inf; return x },
		"all -inf": func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = -inf
			}
			return x
		},
	}
	for name, row := range rows {
		for _, n := range ns {
			for _, wider := range []int{0, 1, 15, 16, 17} {
				x := row(n)
				x = append(x, smData(99, wider)...) // never read
				want := guarded(n + wider)
				smWith("go", func() { softmaxPrefixParts(want, x, n, scale) })
				for _, impl := range smImpls() {
					for _, inPlace := range []bool{false, true} {
						what := fmt.Sprintf("%s n=%d t=%d %s in place %v", name, n, n+wider, impl, inPlace)
						got, in := guarded(n+wider), x
						if inPlace {
							copy(got, x)
							in = got
						}
						smWith(impl, func() { SoftmaxPrefix(got, in, n, scale) })
						checkSame(t, what, got, want)
					}
				}
			}
		}
	}
}

// TestSoftmaxPrefixNegativeControl: the bitwise comparison above sees a
// softmax summed in float32 in order, which rounds differently from
// ExpSum's float64 lanes on at least one of a few rows.
func TestSoftmaxPrefixNegativeControl(t *testing.T) {
	const scale = 0.5
	for n := 20; n < 40; n++ {
		x := smData(uint64(n)+11, n)
		got := make([]float32, n)
		SoftmaxPrefix(got, x, n, scale)
		naive := make([]float32, n)
		m := scale * Max(x)
		var sum float32
		for j, v := range x {
			naive[j] = float32(math.Exp(float64(v*scale - m)))
			sum += naive[j]
		}
		for j := range naive {
			naive[j] /= sum
			if !sameF32(naive[j], got[j]) {
				return
			}
		}
	}
	t.Error("a float32 softmax matched SoftmaxPrefix's bits on every row: the comparison would not see a changed sum")
}

func TestSoftmaxPrefixPanics(t *testing.T) {
	for _, c := range []struct{ n, lx, ly int }{{0, 4, 4}, {5, 4, 8}, {5, 8, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SoftmaxPrefix of %d elements, len(x) %d, len(y) %d: no panic", c.n, c.lx, c.ly)
				}
			}()
			SoftmaxPrefix(make([]float32, c.ly), make([]float32, c.lx), c.n, 1)
		}()
	}
}
