package models

import (
	"math"
	"testing"
)

func TestScheduleAt(t *testing.T) {
	s := Schedule{LR: 1e-3, Warmup: 100, Iters: 2000}
	for _, tc := range []struct {
		it   int
		want float64
	}{
		{0, 1e-3 * 0.01 * 1.0}, // first warmup step, cos(0) = 1
		{49, 1e-3 * 0.5 * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*49/2000)))},
		{99, 1e-3 * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*99/2000)))}, // warmup done
		{1000, 1e-3 * (0.1 + 0.9*0.5)},                             // half way: cos(π/2) = 0
		{2000, 1e-3 * 0.1},                                         // the floor
	} {
		if got := s.At(tc.it); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Schedule%+v.At(%d) = %.10g, want %.10g", s, tc.it, got, tc.want)
		}
	}
	// monotone after warmup
	prev := s.At(99)
	for it := 100; it < 2000; it += 37 {
		if got := s.At(it); got > prev {
			t.Fatalf("Schedule.At(%d) = %g rose above %g after warmup", it, got, prev)
		}
		prev = s.At(it)
	}
}
