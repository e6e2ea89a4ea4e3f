package recompute

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// plainMoves is every forward, then every backward.
func plainMoves(n int) Moves { return Chen(n, nil, nil) }

// TestSimulateByHand: the plain schedule of three links, the peak
// counted by hand.
func TestSimulateByHand(t *testing.T) {
	links := []Link{
		{Out: 10, Saved: 30, TempF: 35, TempB: 5, Fwd: 1, Bwd: 2},
		{Out: 10, Saved: 20, TempF: 20, TempB: 8, Fwd: 1, Bwd: 2},
		{Out: 1, Saved: 40, TempF: 50, TempB: 2, Fwd: 3, Bwd: 4},
	}
	time, peak, err := Simulate(links, 10, plainMoves(3))
	if err != nil {
		t.Fatal(err)
	}
	// F0: 0+10+35 = 45; after it x0 (10) and its saved 30: 40 live
	// F1: 40+10+20 = 70; after it x1 and its saved 20: 70 live
	// F2: 70+1+50 = 121; its output nobody reads dies, its saved 40: 110
	// B2: 110+2 + dx1 10 = 122, the peak; then 70 live
	// B1: 70+8 + dx0 10 = 88; B0: 40+5 + the input's gradient 10 = 55
	if time != 13 || peak != 122 {
		t.Errorf("Simulate(plain) = time %v, peak %d; want 13 and 122", time, peak)
	}
	if _, _, err := Simulate(links, 10, Moves{{Link: 0}, {Link: 2}}); !errors.Is(err, ErrSchedule) {
		t.Errorf("a forward of link 2 after link 0: error %v, want ErrSchedule", err)
	}
}

// TestOptimalEqualsExhaustive: the dynamic program finds the optimum of
// trying every schedule, on random chains with partial saves, over a
// range of budgets, nested and single-level.
func TestOptimalEqualsExhaustive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 40 {
		n := 2 + trial%8
		links := RandomChain(r, n, true)
		_, plainPeak, _ := Simulate(links, 6, plainMoves(n))
		for _, frac := range []float64{0.3, 0.45, 0.6, 0.8, 1} {
			budget := int64(frac * float64(plainPeak))
			for _, nested := range []bool{true, false} {
				dp, errDP := Optimal(links, 6, budget, 1, nested)
				ex, errEx := Exhaustive(links, 6, budget, nested)
				if (errDP == nil) != (errEx == nil) {
					t.Fatalf("n=%d budget %d nested=%v: dp error %v, exhaustive %v", n, budget, nested, errDP, errEx)
				}
				if errDP != nil {
					if !errors.Is(errDP, ErrBudget) {
						t.Fatal(errDP)
					}
					continue
				}
				if math.Abs(dp.Time-ex.Time) > 1e-9 {
					t.Errorf("n=%d budget %d nested=%v: dp time %v (%v), exhaustive %v (%v)", n, budget, nested, dp.Time, dp.Moves, ex.Time, ex.Moves)
				}
			}
		}
	}
}

// TestSingleLevelEqualsEveryCheckpointSubset: without nesting, the
// dynamic program's optimum is the best of every subset of checkpoints
// (Chen's schedules, simulated one by one), on chains of up to 12 links
// of unequal sizes and costs; nesting is never slower.
func TestSingleLevelEqualsEveryCheckpointSubset(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 30 {
		n := 3 + trial%10 // 3..12 links
		links := RandomChain(r, n, false)
		_, plainPeak, _ := Simulate(links, 5, plainMoves(n))
		for _, frac := range []float64{0.35, 0.5, 0.7, 0.9} {
			budget := int64(frac * float64(plainPeak))
			best, fits := BestSubset(links, 5, budget)
			dp, err := Optimal(links, 5, budget, 1, false)
			if !fits {
				if !errors.Is(err, ErrBudget) {
					t.Errorf("n=%d budget %d: no subset fits, dp gives %v, %v", n, budget, dp.Moves, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("n=%d budget %d: %v (a subset fits at time %v)", n, budget, err, best)
			}
			if math.Abs(dp.Time-best) > 1e-9 {
				t.Errorf("n=%d budget %d: single-level dp %v (%v), best subset %v", n, budget, dp.Time, dp.Moves, best)
			}
			if nested, err := Optimal(links, 5, budget, 1, true); err != nil || nested.Time > dp.Time+1e-9 {
				t.Errorf("n=%d budget %d: nested %v, %v; single level %v", n, budget, nested.Time, err, dp.Time)
			}
		}
	}
}

// TestOptimalLimits: a budget above the plain peak gives the plain
// schedule (no recomputation); one below every schedule's peak is refused;
// a coarse quantum still fits the budget.
func TestOptimalLimits(t *testing.T) {
	links := RandomChain(rand.New(rand.NewPCG(5, 6)), 9, true)
	plainTime, plainPeak, _ := Simulate(links, 7, plainMoves(9))
	s, err := Optimal(links, 7, plainPeak*2, 1, true)
	if err != nil || s.Time > plainTime {
		t.Errorf("Optimal(2x the plain peak) = %v at %v, %v; want the plain time %v", s.Moves, s.Time, err, plainTime)
	}
	if _, err := Optimal(links, 7, 10, 1, true); !errors.Is(err, ErrBudget) {
		t.Errorf("Optimal(10 bytes): %v, want ErrBudget", err)
	}
	budget := plainPeak * 6 / 10
	exact, err := Optimal(links, 7, budget, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := Optimal(links, 7, budget, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	if coarse.Peak > budget || coarse.Time < exact.Time {
		t.Errorf("quantum 8: peak %d (budget %d), time %v (exact %v)", coarse.Peak, budget, coarse.Time, exact.Time)
	}
}
