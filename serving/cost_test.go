package serving

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func randomWork(r *rand.Rand, swaps bool) Work {
	w := Work{DecodeTokens: int64(r.IntN(200))}
	w.DecodeContext = w.DecodeTokens * int64(1+r.IntN(2000))
	if r.IntN(2) == 0 {
		n, s := int64(1+r.IntN(2000)), int64(r.IntN(500))
		w.PrefillTokens, w.PrefillPairs = n, n*s+n*(n+1)/2
	}
	if swaps {
		w.SwapBlocks = int64(r.IntN(30))
	}
	return w
}

// measurements are n random iterations timed exactly by DefaultCost.
func measurements(r *rand.Rand, n int, swaps bool) ([]Work, []float64) {
	var work []Work
	var secs []float64
	for range n {
		w := randomWork(r, swaps)
		work = append(work, w)
		secs = append(secs, DefaultCost.Time(w))
	}
	return work, secs
}

func TestFitRecoversKnownCost(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	work, secs := measurements(r, 200, true)
	got, rms, err := Fit(work, secs)
	if err != nil {
		t.Fatal(err)
	}
	want, have := DefaultCost.terms(), got.terms()
	for i := range want {
		if math.Abs(have[i]-want[i]) > 1e-9*want[i]+1e-15 {
			t.Errorf("%s = %g, want %g", costNames[i], have[i], want[i])
		}
	}
	if rms > 1e-12 {
		t.Errorf("rms residual %g on exact data", rms)
	}
	// With 2% noise the fit stays close and the residual says how noisy.
	for i := range secs {
		secs[i] *= 1 + 0.02*r.NormFloat64()
	}
	got, rms, err = Fit(work, secs)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.Overhead-DefaultCost.Overhead) > 0.1*DefaultCost.Overhead || math.Abs(got.DecodeContext-DefaultCost.DecodeContext) > 0.1*DefaultCost.DecodeContext {
		t.Errorf("noisy fit %+v too far from %+v", got, DefaultCost)
	}
	if rms <= 0 {
		t.Errorf("rms residual %g on noisy data", rms)
	}
}

func TestFitLeavesUnseenTermsAtZero(t *testing.T) {
	work, secs := measurements(rand.New(rand.NewPCG(3, 4)), 50, false)
	got, _, err := Fit(work, secs)
	if err != nil {
		t.Fatal(err)
	}
	if got.SwapBlock != 0 || math.Abs(got.Overhead-DefaultCost.Overhead) > 1e-12 {
		t.Fatalf("fit without swaps: %+v", got)
	}
}

func TestFitRefusesTooFewMeasurements(t *testing.T) {
	w := []Work{{DecodeTokens: 1, DecodeContext: 5}, {PrefillTokens: 3, PrefillPairs: 6}}
	if _, _, err := Fit(w, []float64{1, 2}); !errors.Is(err, ErrFit) {
		t.Fatalf("2 measurements for 5 terms: %v, want ErrFit", err)
	}
	if _, _, err := Fit(w, []float64{1}); !errors.Is(err, ErrFit) {
		t.Fatalf("mismatched lengths: %v, want ErrFit", err)
	}
}

func TestCostValidate(t *testing.T) {
	if err := DefaultCost.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Cost{{}, {Overhead: -1}, {Overhead: math.NaN()}, {Overhead: 1, SwapBlock: math.Inf(1)}} {
		if c.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", c)
		}
	}
}

func TestBatchWork(t *testing.T) {
	a := NewSeq(&Request{Prompt: 10, Output: 5})
	b := NewSeq(&Request{Prompt: 4, Output: 5})
	bt := Batch{Entries: []Entry{{Seq: a, Start: 12, N: 1}, {Seq: b, Start: 1, N: 3}}, SwapIn: make([]Copy, 2)}
	// a decodes at position 12 (13 keys); b prefills positions 1..3 (2+3+4 pairs).
	want := Work{DecodeTokens: 1, DecodeContext: 13, PrefillTokens: 3, PrefillPairs: 9, SwapBlocks: 2}
	if got := bt.Work(); got != want {
		t.Fatalf("Work() = %+v, want %+v", got, want)
	}
}

// TestFitNonNegative: times made by a model with no decode-context cost,
// plus noise that pulls least squares' weight for that term below 0,
// fit to a model whose every term is >= 0 and whose named zero is that
// term; exact data with every term positive is left as Fit finds it.
func TestFitNonNegative(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	work, secs := measurements(r, 200, true)
	got, _, zeroed, err := FitNonNegative(work, secs)
	if err != nil || len(zeroed) != 0 || math.Abs(got.Overhead-DefaultCost.Overhead) > 1e-9*DefaultCost.Overhead {
		t.Fatalf("exact data: %+v, zeroed %v, %v", got, zeroed, err)
	}
	truth := DefaultCost
	truth.DecodeContext = 0
	for i, w := range work {
		// noise falling with the context read: its least-squares weight is negative
		secs[i] = truth.Time(w) - 2e-9*float64(w.DecodeContext)*(1+0.1*r.Float64())
	}
	plain, _, err := Fit(work, secs)
	if err != nil || plain.DecodeContext >= 0 {
		t.Fatalf("least squares: decode context %g (%v), want < 0 for this test to mean anything", plain.DecodeContext, err)
	}
	got, _, zeroed, err = FitNonNegative(work, secs)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got.terms() {
		if v < 0 {
			t.Errorf("%s = %g < 0", costNames[i], v)
		}
	}
	if len(zeroed) == 0 || zeroed[0] != "decode context" || got.DecodeContext != 0 {
		t.Errorf("zeroed %v, decode context %g: want the decode context held at 0", zeroed, got.DecodeContext)
	}
}
