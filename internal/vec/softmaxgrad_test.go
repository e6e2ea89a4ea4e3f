package vec

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// softmaxGradRef is SoftmaxGrad by its doc: the dot's products to lane
// j%4 of four sums in order, the tail to lane 0, (0+1)+(2+3); then each
// element in float64. seq sums the dot in one sequential chain instead
// (the negative control's order).
func softmaxGradRef(y, dy []float32, scale float64, seq bool) []float32 {
	var l [4]float64
	n4 := len(y) &^ 3
	for j := range y {
		lane := j % 4
		if j >= n4 || seq {
			lane = 0
		}
		l[lane] += float64(y[j]) * float64(dy[j])
	}
	dot := (l[0] + l[1]) + (l[2] + l[3])
	ds := make([]float32, len(y))
	for j := range y {
		ds[j] = float32(scale * float64(y[j]) * (float64(dy[j]) - dot))
	}
	return ds
}

// softmaxGradData is a row of n probabilities (positive, summing to about
// 1, of many magnitudes) and a gradient for it.
func softmaxGradData(seed uint64, n int) (y, dy []float32) {
	x := smData(seed, n)
	y = make([]float32, n)
	var sum float64
	for j, v := range x {
		y[j] = float32(math.Exp(float64(v)))
		sum += float64(y[j])
	}
	for j := range y {
		y[j] = float32(float64(y[j]) / sum)
	}
	return y, smData(seed+1, n)
}

// TestSoftmaxGrad checks SoftmaxGrad bitwise against its definition on
// every implementation and row length, in place over y and over dy too.
func TestSoftmaxGrad(t *testing.T) {
	const scale = 0.17677669529663687
	for _, n := range smLengths() {
		y, dy := softmaxGradData(uint64(n)+40, n)
		want := softmaxGradRef(y, dy, scale, false)
		for _, impl := range smImpls() {
			t.Run(fmt.Sprintf("%s/n=%d", impl, n), func(t *testing.T) {
				for _, alias := range []string{"", "y", "dy"} {
					yc, dyc := slices.Clone(y), slices.Clone(dy)
					ds := make([]float32, n+3) // longer than y: the rest untouched
					ds[n] = 7
					out := ds[:n]
					switch alias {
					case "y":
						out = yc
					case "dy":
						out = dyc
					}
					smWith(impl, func() { SoftmaxGrad(out, yc, dyc, scale) })
					for j, v := range want {
						if math.Float32bits(out[j]) != math.Float32bits(v) {
							t.Fatalf("ds over %q: [%d] = %v, want %v", alias, j, out[j], v)
						}
					}
					if alias == "" && ds[n] != 7 {
						t.Fatalf("ds[%d] written past len(y)", n)
					}
				}
			})
		}
	}
}

// TestSoftmaxGradCatchesOrder is the negative control of TestSoftmaxGrad:
// on random rows the dot's order rarely shows in float32, so this row is
// made for it. Its products 1e8, 1e-9 and -1e8 fall in lanes 0, 1 and 0:
// the lanes keep 1e-9, one sequential chain loses it, and ds[1] =
// scale·(1e-9 − dot) tells them apart.
func TestSoftmaxGradCatchesOrder(t *testing.T) {
	y := []float32{1, 1, 0, 0, 1}
	dy := []float32{1e8, 1e-9, 0, 0, -1e8}
	want, seq := softmaxGradRef(y, dy, 1, false), softmaxGradRef(y, dy, 1, true)
	if slices.Equal(want, seq) {
		t.Fatalf("the sequential dot gives the lanes' bits %v: the row tells nothing", want)
	}
	for _, impl := range smImpls() {
		got := make([]float32, len(y))
		smWith(impl, func() { SoftmaxGrad(got, y, dy, 1) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v (sequential: %v)", impl, got, want, seq)
		}
	}
}

func TestSoftmaxGradPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("SoftmaxGrad with a short dy did not panic")
		}
	}()
	SoftmaxGrad(make([]float32, 4), make([]float32, 4), make([]float32, 3), 1)
}
