package reports

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Verdict is a check's outcome. Most checks pass or fail; a timed check
// (Check.Timing) may also be inconclusive: its measurement could not tell,
// within its time budget, on which side of its target the code stands.
type Verdict string

const (
	Pass         Verdict = "pass"
	Fail         Verdict = "fail"
	Inconclusive Verdict = "inconclusive"
)

// Timing is how a timed check was decided: the median of a per-round
// figure (a paired ratio of two wall-clock times, or a time per unit of
// work) over Rounds rounds, the Level confidence interval of that median
// [Low, High], and the Target the median must stay at most. Entirely at
// or below the target it passes, entirely above it fails, straddling it
// it is inconclusive (Spread says how noisy the rounds were). The sampler
// that fills it is lab.RatioTarget; this package only records and prints.
type Timing struct {
	Target float64 `json:"target"`
	Median float64 `json:"median"`
	// Low and High bound the interval; NaN (null in JSON) when the rounds
	// are too few for one at Level.
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	Level  float64 `json:"level"`
	Rounds int     `json:"rounds"`
	// Spread is (max − min) / median of the rounds.
	Spread float64 `json:"spread"`
	// Unit follows the numbers in text: "x" for a ratio, " s" for seconds.
	Unit string `json:"unit"`
	// Budget is the wall time the sampler was allowed for more rounds,
	// in seconds (0: decided on the rounds the lab had measured).
	Budget float64 `json:"budget_s"`
}

// Verdict places the interval against the target.
func (t Timing) Verdict() Verdict {
	switch {
	case math.IsNaN(t.Low) || math.IsNaN(t.High):
		return Inconclusive
	case t.High <= t.Target:
		return Pass
	case t.Low > t.Target:
		return Fail
	}
	return Inconclusive
}

// Phrase is the timing in words for a check's detail: "median 1.05x,
// 95% interval 1.01x to 1.09x over 14 rounds (spread 12%), target 1.10x".
func (t Timing) Phrase() string {
	num := func(x float64) string { return sig4(x) + t.Unit }
	interval := "too few rounds for an interval"
	if !math.IsNaN(t.Low) && !math.IsNaN(t.High) {
		interval = fmt.Sprintf("%.0f%% interval %s to %s", 100*t.Level, num(t.Low), num(t.High))
	}
	return fmt.Sprintf("median %s, %s over %d rounds (spread %.0f%%), target at most %s",
		num(t.Median), interval, t.Rounds, 100*t.Spread, num(t.Target))
}

// MarshalJSON writes a missing bound as null (JSON has no NaN).
func (t Timing) MarshalJSON() ([]byte, error) {
	type plain Timing
	bound := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	return json.Marshal(struct {
		plain
		Low  *float64 `json:"low"`
		High *float64 `json:"high"`
	}{plain(t), bound(t.Low), bound(t.High)})
}

// UnmarshalJSON reads a null bound back as NaN.
func (t *Timing) UnmarshalJSON(data []byte) error {
	type plain Timing
	var x struct {
		plain
		Low  *float64 `json:"low"`
		High *float64 `json:"high"`
	}
	if err := json.Unmarshal(data, &x); err != nil {
		return err
	}
	*t = Timing(x.plain)
	t.Low, t.High = math.NaN(), math.NaN()
	if x.Low != nil {
		t.Low = *x.Low
	}
	if x.High != nil {
		t.High = *x.High
	}
	return nil
}

// Outcome is the check's verdict; a check read from a report written
// before verdicts were recorded has its Pass alone.
func (c Check) Outcome() Verdict {
	if c.Verdict != "" {
		return c.Verdict
	}
	if c.Pass {
		return Pass
	}
	return Fail
}

// TimedCheck records a check decided by a timing (see Timing) and returns
// its verdict; the detail is followed by the timing's phrase.
func (r *Report) TimedCheck(name string, t Timing, detail string, args ...any) Verdict {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	if detail != "" {
		detail += "; "
	}
	v := t.Verdict()
	r.Checks = append(r.Checks, Check{Name: name, Pass: v == Pass, Verdict: v, Detail: detail + t.Phrase(),
		Timed: true, Timing: &t})
	return v
}

// Inconclusive counts the report's own inconclusive checks (the exit
// gate's hold its labs').
func (r *Report) Inconclusive() int {
	n := 0
	for _, c := range r.Checks {
		if c.Outcome() == Inconclusive {
			n++
		}
	}
	return n
}

// anyInconclusive reports an inconclusive check here or in a report this
// one holds.
func (r *Report) anyInconclusive() bool {
	if r.Inconclusive() > 0 {
		return true
	}
	for _, sub := range r.Reports {
		if sub.anyInconclusive() {
			return true
		}
	}
	return false
}

// Outcome is the report's verdict: fail when a check failed, else
// inconclusive when a timed check could not tell, else pass.
func (r *Report) Outcome() Verdict {
	switch {
	case r.Failed():
		return Fail
	case r.anyInconclusive():
		return Inconclusive
	}
	return Pass
}

// sig4 is x with four significant digits, trailing zeros kept (1.000,
// 12.35), so that a bound and the target line up.
func sig4(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= 1e6 || math.Abs(x) < 1e-3 {
		return formatFloat(x)
	}
	decimals := max(0, 3-int(math.Floor(math.Log10(math.Abs(x)))))
	return strconv.FormatFloat(x, 'f', decimals, 64)
}
