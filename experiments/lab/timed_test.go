package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gptlab/reports"
)

// TestMedianIntervalTable: the sign test's interval is the order
// statistics of the published tables (n = 10: x₍₂₎..x₍₉₎ at 95%;
// n = 20: x₍₆₎..x₍₁₅₎), and none below six rounds.
func TestMedianIntervalTable(t *testing.T) {
	seq := func(n int) []float64 { // 1..n, shuffled
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(i + 1)
		}
		rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
		return xs
	}
	for _, tc := range []struct {
		n      int
		lo, hi float64
	}{{5, math.NaN(), math.NaN()}, {6, 1, 6}, {10, 2, 9}, {20, 6, 15}, {100, 40, 61}} {
		lo, hi := MedianInterval(seq(tc.n), 0.05)
		same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
		if !same(lo, tc.lo) || !same(hi, tc.hi) {
			t.Errorf("n=%d: interval %v..%v, want %v..%v", tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestMedianIntervalCoverage: over many samples of a skewed distribution
// (a lognormal with outliers, as timings are), the 95% interval holds the
// true median at least 95% of the time.
func TestMedianIntervalCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials = 2000
	covered := 0
	for range trials {
		xs := make([]float64, 15)
		for i := range xs {
			xs[i] = math.Exp(0.2 * rng.NormFloat64()) // median 1
			if rng.IntN(10) == 0 {
				xs[i] *= 5 // a neighbour's burst
			}
		}
		if lo, hi := MedianInterval(xs, 0.05); lo <= 1.0 && 1.0 <= hi || math.IsNaN(lo) {
			covered++
		}
	}
	// The bursts shift the true median a little above 1, so coverage of 1 is
	// the harder test; below 93% the interval would be wrong.
	if share := float64(covered) / trials; share < 0.93 {
		t.Errorf("the 95%% interval held the median in %.1f%% of %d samples", 100*share, trials)
	}
}

// synthetic returns a round function drawing ratios around median m with
// relative noise sd, and bursts (a round 3x slower) one time in burst.
func synthetic(seed uint64, m, sd float64, burst int) func() (float64, error) {
	rng := rand.New(rand.NewPCG(seed, 99))
	return func() (float64, error) {
		x := m * math.Exp(sd*rng.NormFloat64())
		if burst > 0 && rng.IntN(burst) == 0 {
			x *= 3
		}
		return x, nil
	}
}

// TestRatioTargetOutcomes: the three verdicts from synthetic rounds: well
// below the target passes, well above fails, at the target with wide
// noise stays inconclusive until the rounds run out, and says its
// interval and spread.
func TestRatioTargetOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		median    float64
		sd        float64
		burst     int
		maxRounds int
		want      reports.Verdict
	}{
		{"below", 0.9, 0.05, 8, 0, reports.Pass},
		{"above", 1.3, 0.05, 8, 0, reports.Fail},
		{"straddling", 1.0, 0.4, 0, 40, reports.Inconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := RatioTarget{Target: 1.0, Budget: time.Hour, MaxRounds: tc.maxRounds}
			tm, err := rt.Sample(context.Background(), nil, synthetic(5, tc.median, tc.sd, tc.burst))
			if err != nil {
				t.Fatal(err)
			}
			if got := tm.Verdict(); got != tc.want {
				t.Fatalf("verdict %s, want %s: %s", got, tc.want, tm.Phrase())
			}
			var r reports.Report
			v := r.TimedCheck("ratio at most 1", tm, "synthetic")
			c := r.Checks[0]
			if v != tc.want || c.Outcome() != tc.want || c.Pass != (tc.want == reports.Pass) || !c.Timed {
				t.Errorf("check %+v, want verdict %s", c, tc.want)
			}
			if tc.want == reports.Inconclusive {
				if tm.Rounds != tc.maxRounds || !strings.Contains(c.Detail, "interval") || !strings.Contains(c.Detail, "spread") {
					t.Errorf("inconclusive after %d rounds (want %d), detail %q", tm.Rounds, tc.maxRounds, c.Detail)
				}
				if r.Failed() {
					t.Error("an inconclusive check failed the report")
				}
			}
			if tc.want == reports.Pass && tm.Rounds > 30 {
				t.Errorf("a clear pass took %d rounds", tm.Rounds)
			}
		})
	}
}

// TestRatioTargetReproducible: the same rounds give the same timing (no
// random resampling), and a JSON round trip keeps it.
func TestRatioTargetReproducible(t *testing.T) {
	rt := RatioTarget{Target: 1.0, Budget: time.Hour}
	a, _ := rt.Sample(context.Background(), nil, synthetic(7, 0.95, 0.1, 5))
	b, _ := rt.Sample(context.Background(), nil, synthetic(7, 0.95, 0.1, 5))
	if a != b {
		t.Fatalf("two samplings of the same rounds: %+v and %+v", a, b)
	}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back reports.Timing
	if err := json.Unmarshal(data, &back); err != nil || back != a {
		t.Errorf("round trip %s: %+v, %v", data, back, err)
	}
	few := rt.Decide([]float64{1, 2, 3})
	if data, err = json.Marshal(few); err != nil || !strings.Contains(string(data), `"low":null`) || few.Verdict() != reports.Inconclusive {
		t.Errorf("three rounds: %s, %v (want null bounds, inconclusive)", data, err)
	}
}

// TestRatioTargetSequentialErrors: sampling until the interval leaves the
// target does not buy verdicts: with the true median 5% below the target
// and noisy rounds, hardly any of 200 samplings ends in FAIL, and with it
// 5% above hardly any in PASS (each at most 2.5% by construction).
func TestRatioTargetSequentialErrors(t *testing.T) {
	for _, tc := range []struct {
		median float64
		wrong  reports.Verdict
	}{{0.95, reports.Fail}, {1.05, reports.Pass}} {
		wrong := 0
		for i := range 200 {
			rt := RatioTarget{Target: 1.0, Budget: time.Hour, MaxRounds: 200}
			tm, _ := rt.Sample(context.Background(), nil, synthetic(uint64(100+i), tc.median, 0.3, 0))
			if tm.Verdict() == tc.wrong {
				wrong++
			}
		}
		if wrong > 6 { // 3%
			t.Errorf("median %.2f: %d of 200 samplings ended %s", tc.median, wrong, tc.wrong)
		}
	}
}

// TestRatioTargetBudget: the budget stops a sampling that cannot decide,
// and is spent on the rounds after the first ten; a cancelled context stops it with its error.
func TestRatioTargetBudget(t *testing.T) {
	slow := synthetic(9, 1.0, 0.5, 0)
	rounds := 0
	rt := RatioTarget{Target: 1.0, Budget: 30 * time.Millisecond}
	tm, err := rt.Sample(context.Background(), nil, func() (float64, error) {
		rounds++
		time.Sleep(2 * time.Millisecond)
		return slow()
	})
	if err != nil || tm.Verdict() != reports.Inconclusive || tm.Rounds < 10 || tm.Rounds > 40 {
		t.Errorf("budget 30ms of 2ms rounds: %d rounds, %s, %v", tm.Rounds, tm.Verdict(), err)
	}
	// The budget is for the rounds past the first ten: ten rounds of 5 ms
	// spend more than a 30 ms budget, and rounds still follow them.
	slow = synthetic(9, 1.0, 0.5, 0)
	tm, err = rt.Sample(context.Background(), nil, func() (float64, error) {
		time.Sleep(5 * time.Millisecond)
		return slow()
	})
	if err != nil || tm.Rounds <= 10 {
		t.Errorf("budget 30ms after ten 5ms rounds: %d rounds, %v; want rounds past the first ten", tm.Rounds, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rt.Sample(ctx, nil, slow); err == nil {
		t.Error("a cancelled sampling returned no error")
	}
	if tm := rt.Decide(make([]float64, 0)); tm.Verdict() != reports.Inconclusive {
		t.Errorf("no rounds: %s", tm.Verdict())
	}
}

// work spins n multiply-adds and returns the result (so the loop stays).
func work(n int) float64 {
	x := 1.0
	for i := range n {
		x = x*1.0000001 + float64(i&1)
	}
	return x
}

var sink atomic.Uint64

// timedPair times a and b back to back, in alternating order, and returns
// a round function giving a's time over b's.
func timedPair(a, b int) func() (float64, error) {
	flip := false
	return func() (float64, error) {
		run := func(n int) time.Duration {
			t0 := time.Now()
			sink.Add(uint64(work(n)))
			return time.Since(t0)
		}
		var ta, tb time.Duration
		if flip {
			tb, ta = run(b), run(a)
		} else {
			ta, tb = run(a), run(b)
		}
		flip = !flip
		return float64(ta) / float64(tb), nil
	}
}

// TestRatioTargetLoadedCore measures for real beside busy goroutines (one
// per core, so the measuring one shares its core): equal work against a
// target of 1.25x passes when quiet and, loaded, must still pass or be
// inconclusive, never fail. Its negative control, twice the work against
// the same target, must never pass.
func TestRatioTargetLoadedCore(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for a few seconds")
	}
	stop := make(chan struct{})
	for range runtime.NumCPU() {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					sink.Add(uint64(work(1000)))
				}
			}
		}()
	}
	defer close(stop)
	rt := RatioTarget{Target: 1.25, Budget: 2 * time.Second}
	const n = 200_000 // about 0.2 ms a side
	for _, tc := range []struct {
		name  string
		a     int
		never reports.Verdict
	}{{"equal work", n, reports.Fail}, {"twice the work", 2 * n, reports.Pass}} {
		tm, err := rt.Sample(context.Background(), nil, timedPair(tc.a, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, loaded: %s: %s", tc.name, tm.Verdict(), tm.Phrase())
		if tm.Verdict() == tc.never {
			t.Errorf("%s on a loaded core: %s (%s)", tc.name, tm.Verdict(), tm.Phrase())
		}
	}
}

func ExampleRatioTarget() {
	// A policy's step time over none's, one ratio a round.
	rounds := []float64{1.04, 1.02, 1.06, 1.01, 1.03, 1.05, 1.02, 1.04, 1.03, 1.02, 1.00, 1.05}
	rt := RatioTarget{Target: 1.1}
	tm := rt.Decide(rounds)
	fmt.Println(tm.Verdict())
	fmt.Println(tm.Phrase())
	// Output:
	// pass
	// median 1.030x, 95% interval 1.020x to 1.050x over 12 rounds (spread 6%), target at most 1.100x
}
