package dataparallel

import (
	"math"
	"testing"
)

// One rank sends nothing and the ring model says 0 bytes: 0 off, not NaN
// (issue 17, defect 7).
func TestOffModel(t *testing.T) {
	for _, tc := range []struct{ sent, model, want float64 }{
		{0, 0, 0},
		{8, 0, math.Inf(1)},
		{101, 100, 0.01},
		{99, 100, 0.01},
	} {
		if got := offModel(tc.sent, tc.model); math.Abs(got-tc.want) > 1e-12 && got != tc.want {
			t.Errorf("offModel(%v, %v) = %v, want %v", tc.sent, tc.model, got, tc.want)
		}
	}
}
