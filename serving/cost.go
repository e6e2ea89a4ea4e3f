package serving

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Cost is a linear model of an iteration's time: a fixed overhead (reading
// the weights once, launching kernels) plus terms in the tokens processed
// and in the context the attention reads. Times are in seconds.
type Cost struct {
	Overhead      float64 // per iteration
	PrefillToken  float64 // per prompt (or recomputed) token
	PrefillPair   float64 // per (query, key) pair of prefill attention
	DecodeToken   float64 // per decoding sequence
	DecodeContext float64 // per token of KV a decode reads
	SwapBlock     float64 // per block copied between device and host
}

// DefaultCost is a 7B-parameter model on one data-centre accelerator, in
// round numbers derived from its sizes rather than measured: 12 ms to read
// 14 GB of fp16 weights, 2·7e9 FLOP per token at about 200 TFLOP/s, 0.5 MB
// of KV per token (32 layers × 4096 × K and V in fp16) read at 1.5 TB/s,
// 0.5 MFLOP of attention per (query, key) pair, and an 8 MB block over a
// 25 GB/s host link.
var DefaultCost = Cost{
	Overhead:      12e-3,
	PrefillToken:  70e-6,
	PrefillPair:   3.5e-9,
	DecodeToken:   70e-6,
	DecodeContext: 0.35e-6,
	SwapBlock:     0.32e-3,
}

// Time is the model's duration of an iteration doing w.
func (c Cost) Time(w Work) float64 {
	return c.Overhead + c.PrefillToken*float64(w.PrefillTokens) + c.PrefillPair*float64(w.PrefillPairs) +
		c.DecodeToken*float64(w.DecodeTokens) + c.DecodeContext*float64(w.DecodeContext) +
		c.SwapBlock*float64(w.SwapBlocks)
}

// Validate reports a cost model with a negative or non-finite term, or
// one whose every iteration would take no time.
func (c Cost) Validate() error {
	terms := c.terms()
	for i, v := range terms {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("cost: %s = %g: want a finite value ≥ 0", costNames[i], v)
		}
	}
	if c.Overhead == 0 && c.PrefillToken == 0 && c.DecodeToken == 0 {
		return errors.New("cost: overhead, prefill-token and decode-token terms are all 0: iterations would take no time")
	}
	return nil
}

var costNames = [...]string{"overhead", "prefill token", "prefill pair", "decode token", "decode context", "swap block"}

func (c Cost) terms() [6]float64 {
	return [6]float64{c.Overhead, c.PrefillToken, c.PrefillPair, c.DecodeToken, c.DecodeContext, c.SwapBlock}
}

func features(w Work) [6]float64 {
	return [6]float64{1, float64(w.PrefillTokens), float64(w.PrefillPairs), float64(w.DecodeTokens), float64(w.DecodeContext), float64(w.SwapBlocks)}
}

// ErrFit says the measurements cannot determine the cost model.
var ErrFit = errors.New("cost fit")

// Fit finds the cost model that best explains measured iterations (the
// work of each and its time in seconds) by linear least squares. A term
// whose feature is zero in every measurement cannot be told apart and is
// left at 0. It also returns the root-mean-square residual in seconds.
func Fit(work []Work, secs []float64) (Cost, float64, error) {
	return fitTerms(work, secs, [6]bool{})
}

// FitNonNegative is Fit with every term at least 0 (a time is never
// negative; correlated terms can make least squares give one a negative
// weight that the others then compensate). It drops the most negative
// term and fits the rest again until none is negative (the active-set
// method of Lawson and Hanson's NNLS, one term at a time). It also
// returns the names of the terms it held at 0.
func FitNonNegative(work []Work, secs []float64) (Cost, float64, []string, error) {
	var fixed [6]bool
	var zeroed []string
	for {
		c, rms, err := fitTerms(work, secs, fixed)
		if err != nil {
			return c, rms, zeroed, err
		}
		worst := -1
		for j, v := range c.terms() {
			if v < 0 && (worst < 0 || v < c.terms()[worst]) {
				worst = j
			}
		}
		if worst < 0 {
			return c, rms, zeroed, nil
		}
		fixed[worst] = true
		zeroed = append(zeroed, costNames[worst])
	}
}

// fitTerms is Fit with the terms marked in fixed held at 0.
func fitTerms(work []Work, secs []float64, fixed [6]bool) (Cost, float64, error) {
	if len(work) != len(secs) {
		return Cost{}, 0, fmt.Errorf("%w: %d measurements of work, %d times", ErrFit, len(work), len(secs))
	}
	var used []int
	for j := range 6 {
		if fixed[j] {
			continue
		}
		for _, w := range work {
			if features(w)[j] != 0 {
				used = append(used, j)
				break
			}
		}
	}
	if len(work) < len(used) || len(used) == 0 {
		return Cost{}, 0, fmt.Errorf("%w: %d measurements for %d terms", ErrFit, len(work), len(used))
	}
	// Scale each column to unit largest magnitude: context and pair counts
	// are millions, the overhead column is 1.
	scale := make([]float64, len(used))
	for k, j := range used {
		for _, w := range work {
			scale[k] = max(scale[k], math.Abs(features(w)[j]))
		}
	}
	a := mat.NewDense(len(work), len(used), nil)
	for i, w := range work {
		f := features(w)
		for k, j := range used {
			a.Set(i, k, f[j]/scale[k])
		}
	}
	b := mat.NewVecDense(len(secs), append([]float64(nil), secs...))
	var x mat.VecDense
	if err := x.SolveVec(a, b); err != nil {
		return Cost{}, 0, fmt.Errorf("%w: %v", ErrFit, err)
	}
	var t [6]float64
	for k, j := range used {
		t[j] = x.AtVec(k) / scale[k]
	}
	c := Cost{Overhead: t[0], PrefillToken: t[1], PrefillPair: t[2], DecodeToken: t[3], DecodeContext: t[4], SwapBlock: t[5]}
	var ss float64
	for i, w := range work {
		d := c.Time(w) - secs[i]
		ss += d * d
	}
	return c, math.Sqrt(ss / float64(len(work))), nil
}
