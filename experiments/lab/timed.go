package lab

import (
	"context"
	"math"
	"slices"
	"time"

	"gptlab/reports"
)

// A timed check (reports.Check.Timed) is decided here, by a statistic
// over rounds rather than by one median: a round measures a figure that
// must stay at most a target (the step time of a policy over none's in
// the same round, a time per million requests), and rounds are added
// until the confidence interval of the figure's median lies on one side
// of the target or the time budget is spent.
//
// The interval is the sign test's (the order statistics of the rounds,
// as Conover's Practical Nonparametric Statistics §3.2 gives it): it
// assumes nothing of the rounds' distribution but independence, needs no
// random resampling (so no seed: the same rounds give the same interval),
// and a round slowed ten times by a neighbour's burst counts once, as one
// round above the median, where it would drag a mean or a bootstrap of
// one far. Its cost is power: it needs ten rounds or so before it can
// decide. The sampler looks at 10, 15, 23, 35, … rounds (each look half as
// many again as the one before) and look j spends 6/(π²j²) of α = 5%:
// the looks' shares sum to 5%, so the intervals hold together at 95%
// however many looks are taken (a confidence sequence), and sampling
// until the interval leaves the target cannot manufacture a verdict. At
// the first look one round of ten may be on the wrong side, at the second
// two of fifteen, at the third three of twenty-three.
//
// This lives in the labs' package, not in reports, because it measures:
// it runs a lab's rounds against a clock and its context. reports only
// records the outcome (reports.Timing), so a report read back from JSON
// carries its verdict without the sampler.

// timedLevel is the confidence of every timed verdict.
const timedLevel = 0.95

// RatioTarget is a timed check's target and the sampler's limits.
type RatioTarget struct {
	// Target is the most the median of the rounds' figure may be.
	Target float64
	// Budget is the wall time allowed for rounds past those the lab
	// measured; MinRounds are measured however long they take.
	Budget time.Duration
	// MinRounds is the first look (10 if 0: the fewest rounds at which the
	// sign test can decide at the first look's level).
	MinRounds int
	// MaxRounds stops the sampler (1000 if 0).
	MaxRounds int
	// Unit follows the numbers in text ("x" if empty).
	Unit string
}

func (t RatioTarget) minRounds() int {
	if t.MinRounds > 0 {
		return t.MinRounds
	}
	return 10
}

func (t RatioTarget) maxRounds() int {
	if t.MaxRounds > 0 {
		return max(t.MaxRounds, t.minRounds())
	}
	return 1000
}

// Sample decides the check: it starts from the rounds the lab already
// measured (have), calls round for more until the interval leaves the
// target or the budget is spent, and returns the timing whose Verdict is
// the check's. round may be nil: the verdict is then the rounds' in have.
func (t RatioTarget) Sample(ctx context.Context, have []float64, round func() (float64, error)) (reports.Timing, error) {
	xs := slices.Clone(have)
	n0 := t.minRounds()
	var start time.Time // when the first n0 rounds were in: the budget is for the rounds past them
	look, next := 1, max(n0, len(xs))
	for {
		if start.IsZero() && len(xs) >= n0 {
			start = time.Now()
		}
		stop := round == nil || len(xs) >= t.maxRounds() || !start.IsZero() && time.Since(start) >= t.Budget
		if len(xs) >= next || stop {
			tm := t.timing(xs, lookAlpha(look))
			if tm.Verdict() != reports.Inconclusive || stop {
				return tm, nil
			}
			look++
			next = max(len(xs)+1, int(math.Ceil(lookGrowth*float64(next))))
		}
		if err := ctx.Err(); err != nil {
			return reports.Timing{}, err
		}
		x, err := round()
		if err != nil {
			return reports.Timing{}, err
		}
		xs = append(xs, x)
	}
}

// TargetWord says a verdict as a target stated beside the checks rather
// than as one of them: met, missed or undecided.
func TargetWord(v reports.Verdict) string {
	return map[reports.Verdict]string{reports.Pass: "met", reports.Fail: "missed", reports.Inconclusive: "undecided"}[v]
}

// Decide is the verdict of rounds already measured, one look at 95%.
func (t RatioTarget) Decide(xs []float64) reports.Timing {
	return t.timing(xs, 1-timedLevel)
}

// lookGrowth spaces the looks: each at half as many rounds again as the
// one before (10, 15, 23, 35, …).
const lookGrowth = 1.5

// lookAlpha is look j's share of the 5%: 6/(π²j²) of it, so that the
// shares of every look there may be sum to 5%.
func lookAlpha(j int) float64 {
	return (1 - timedLevel) * 6 / (math.Pi * math.Pi * float64(j) * float64(j))
}

func (t RatioTarget) timing(xs []float64, alpha float64) reports.Timing {
	unit := t.Unit
	if unit == "" {
		unit = "x"
	}
	lo, hi := MedianInterval(xs, alpha)
	med, spread := math.NaN(), 0.0
	if len(xs) > 0 {
		med = Median(xs)
		spread = (slices.Max(xs) - slices.Min(xs)) / med
	}
	return reports.Timing{Target: t.Target, Median: med, Low: lo, High: hi, Level: timedLevel,
		Rounds: len(xs), Spread: spread, Unit: unit, Budget: t.Budget.Seconds()}
}

// MedianInterval is the sign test's 1−alpha confidence interval of the
// median of xs: [x₍ₖ₎, x₍ₙ₋ₖ₊₁₎] of the sorted rounds, k the largest with
// P(Binomial(n, ½) < k) ≤ alpha/2. NaN, NaN when n is too small for one.
func MedianInterval(xs []float64, alpha float64) (lo, hi float64) {
	n := len(xs)
	k, tail := 0, 0.0 // tail: P(B < k+1) = P(B ≤ k)
	for ; k < n; k++ {
		tail += binomHalf(n, k)
		if tail > alpha/2 {
			break
		}
	}
	// k is now the largest count with P(B ≤ k−1) ≤ alpha/2.
	if k == 0 || 2*k > n {
		return math.NaN(), math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[k-1], s[n-k]
}

// binomHalf is P(Binomial(n, ½) = k), in logs so that n can be large.
func binomHalf(n, k int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2)
}
