package lab

import (
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot/plotter"
	G "gorgonia.org/gorgonia"
)

// Ratio is a/b for a report, NaN (null in JSON) when b is 0.
func Ratio(a, b int64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// Median is the median of xs (for an even count, the lower of the two
// middle values: gonum's empirical quantile); NaN for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return stat.Quantile(0.5, stat.Empirical, s, nil)
}

// MedianDuration is Median of durations.
func MedianDuration(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(Median(xs))
}

// Mean is the arithmetic mean of xs.
func Mean(xs []float64) float64 { return stat.Mean(xs, nil) }

// MovingAverage is the mean of every win consecutive losses (win = a 50th
// of the run, at least 1), at the step that ends each window.
func MovingAverage(losses []float32) (xy plotter.XYs, win int) {
	win = max(1, len(losses)/50)
	xy = make(plotter.XYs, 0, len(losses))
	sum := 0.0
	for i, l := range losses {
		sum += float64(l)
		if i >= win {
			sum -= float64(losses[i-win])
		}
		if i+1 >= win {
			xy = append(xy, plotter.XY{X: float64(i + 1), Y: sum / float64(win)})
		}
	}
	return xy, win
}

// RelDiff is ‖a − b‖₂ / ‖b‖₂ (NaN when the lengths differ; ‖a − b‖₂ when
// b is zero).
func RelDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// Floats is a float32 gorgonia value's elements (a scalar as one), nil for
// any other value.
func Floats(v G.Value) []float32 {
	switch x := v.(type) {
	case *G.F32:
		return []float32{float32(*x)}
	case nil:
		return nil
	default:
		if d, ok := v.Data().([]float32); ok {
			return d
		}
		if f, ok := v.Data().(float32); ok {
			return []float32{f}
		}
	}
	return nil
}
