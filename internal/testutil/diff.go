package testutil

import "math"

// MaxAbsDiff is the largest |a[i] - b[i]| (a NaN counts as a difference;
// slices of different lengths differ by +Inf).
func MaxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var m float64
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if d > m || math.IsNaN(d) {
			m = d
		}
	}
	return m
}
