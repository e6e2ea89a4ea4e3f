package serving

import (
	"math"
	"testing"
)

// percentileOf is numpy's linear percentile (p in [0, 100]) of x, as
// Summarize takes it.
func percentileOf(x []float64, p float64) float64 {
	if len(x) == 0 {
		return 0
	}
	w := make([]weighted, len(x))
	for i, v := range x {
		w[i] = weighted{v, 1}
	}
	sortWeighted(w)
	return percentile(w, int64(len(x)), p)
}

func TestPercentileIsNumpyLinear(t *testing.T) {
	// Values from numpy: np.percentile(x, p) with the default method.
	cases := []struct {
		x    []float64
		p    float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 90, 3.7},
		{[]float64{4, 1, 3, 2}, 99, 3.97},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 9.91},
		{[]float64{5}, 90, 5},
		{[]float64{2, 2, 2, 7}, 25, 2},
		{nil, 50, 0},
	}
	for _, tc := range cases {
		if got := percentileOf(tc.x, tc.p); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.x, tc.p, got, tc.want)
		}
	}
}

func TestWeightedDistEqualsExpanded(t *testing.T) {
	w := []weighted{{0.03, 5}, {0.01, 2}, {0.5, 1}, {0.02, 7}}
	var x []float64
	for _, v := range w {
		for range v.Count {
			x = append(x, v.V)
		}
	}
	got, want := distWeighted(w), distOf(x)
	g, e := []float64{got.Mean, got.Std, got.Median, got.P90, got.P99}, []float64{want.Mean, want.Std, want.Median, want.P90, want.P99}
	for i := range g {
		if got.N != want.N || math.Abs(g[i]-e[i]) > 1e-15 {
			t.Fatalf("weighted %+v, expanded %+v", got, want)
		}
	}
	if math.Abs(want.Std-0.1193762) > 1e-6 { // np.std of the 15 values
		t.Fatalf("std %v, want 0.1193762 (population)", want.Std)
	}
}

// TestRecorderByHand feeds one request's tokens at known iteration ends.
func TestRecorderByHand(t *testing.T) {
	r := NewRecorder()
	s := NewSeq(&Request{ID: 0, Arrival: 1, Prompt: 4, Output: 4})
	one := NewSeq(&Request{ID: 1, Arrival: 1.5, Prompt: 4, Output: 1})
	gone := NewSeq(&Request{ID: 2, Arrival: 0, Prompt: 4, Output: 9})
	for _, q := range []*Seq{s, one, gone} {
		r.Arrive(q)
	}
	ends := []float64{1.5, 1.7, 1.8, 2.6, 2.7}
	tokens := map[int][]*Seq{0: {s, gone}, 1: {s, gone}, 2: {one}, 3: {s}, 4: {s}}
	for k, end := range ends {
		if got := r.Iteration(end); got != k {
			t.Fatalf("iteration index %d, want %d", got, k)
		}
		for _, q := range tokens[k] {
			q.Generated++
			r.Token(q, k)
		}
		if k == 2 {
			r.Finish(one)
		}
	}
	r.Cancel(gone, 2.0)
	r.Finish(s)
	sum := r.Summary(SLO{TTFT: 0.31, TPOT: 0.3})
	// s: tokens at 1.5, 1.7, 2.6, 2.7 → TTFT 0.5, E2E 1.7, TPOT 0.4, gaps 0.2 0.9 0.1.
	// one: a single token at 1.8 → TTFT 0.3, TPOT 0 for goodput, none for the TPOT summary.
	// gone's tokens are not counted.
	if sum.Completed != 2 || sum.Cancelled != 1 || sum.OutputTokens != 5 {
		t.Fatalf("summary %+v", sum)
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("TTFT mean", sum.TTFT.Mean, 0.4)
	near("TPOT mean", sum.TPOT.Mean, 0.4)
	near("ITL median", sum.ITL.Median, 0.2)
	near("ITL mean", sum.ITL.Mean, 0.4)
	near("E2E max via p99", sum.E2E.P99, 0.3+0.99*(1.7-0.3))
	near("duration", sum.Duration, 2.7)
	near("goodput", sum.Goodput, 1/2.7) // only `one` meets TTFT ≤ 0.31
	if sum.TPOT.N != 1 || sum.ITL.N != 3 {
		t.Fatalf("TPOT over %d requests, ITL over %d gaps; want 1 and 3", sum.TPOT.N, sum.ITL.N)
	}
}
