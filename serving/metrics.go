package serving

import (
	"cmp"
	"math"
	"slices"
)

// The metrics follow vLLM's benchmarks/benchmark_serving.py
// (calculate_metrics): only completed requests count; TTFT is the time from
// arrival to the first token; TPOT is (E2E − TTFT)/(output tokens − 1) per
// request, over requests with more than one output token; ITL pools every
// gap between consecutive tokens of every completed request; E2E is the
// time from arrival to the last token. Percentiles interpolate linearly
// between order statistics (numpy's default), Std is the population
// standard deviation (np.std). Throughputs divide by the run's duration,
// from the first arrival to the last request's end. Goodput counts the
// completed requests meeting every SLO given (a request with one output
// token has TPOT 0 for it) per second of that duration.

// SLO holds latency limits in seconds; 0 leaves a metric unlimited.
type SLO struct {
	TTFT, TPOT, E2E float64
}

// Dist summarises a latency distribution, in seconds.
type Dist struct {
	N                           int
	Mean, Std, Median, P90, P99 float64
}

// Summary is a run's serving metrics.
type Summary struct {
	Requests, Completed, Cancelled, Rejected int
	Duration                                 float64 // seconds
	InputTokens, OutputTokens                int64   // of completed requests
	RequestThroughput                        float64 // completed requests per second
	OutputThroughput                         float64 // output tokens per second
	TotalTokenThroughput                     float64 // input and output tokens per second
	GoodRequests                             int
	Goodput                                  float64 // requests per second meeting every SLO
	TTFT, TPOT, ITL, E2E                     Dist
}

// seqRecord is what the recorder keeps of a sequence in flight. Token gaps
// between consecutive iterations are kept as runs of iterations (the gap is
// that iteration's duration); other gaps are kept as values.
type seqRecord struct {
	started  bool
	first    float64 // time of the first token
	lastIter int32   // iteration of the last token
	runStart int32   // first iteration of the open run, or -1
	runs     []int32 // closed runs, pairs [first, last]
	gaps     []float64
}

// Recorder collects a run's per-request outcomes from a driver. Its cost
// is constant per token and its memory a few bytes per iteration and per
// request, so it keeps up with a million requests.
type Recorder struct {
	iterEnd []float64 // end time of each iteration
	diff    []int32   // difference array: completed requests' tokens per iteration
	gaps    []float64 // gaps spanning more than one iteration, of completed requests
	ttft    []float64 // per completed request, in completion order
	e2e     []float64
	tpot    []float64 // NaN for requests with one output token
	first   float64
	last    float64
	seen    bool
	sum     Summary
}

// NewRecorder makes an empty recorder.
func NewRecorder() *Recorder { return &Recorder{diff: []int32{0}} }

func (r *Recorder) at(t float64) {
	if !r.seen || t < r.first {
		r.first = t
	}
	r.seen = true
	r.last = max(r.last, t)
}

// Arrive records a request's arrival.
func (r *Recorder) Arrive(s *Seq) {
	r.at(s.Req.Arrival)
	r.sum.Requests++
}

// Iteration records the end of an iteration and returns its index for Token.
func (r *Recorder) Iteration(end float64) int {
	r.iterEnd = append(r.iterEnd, end)
	r.diff = append(r.diff, 0)
	return len(r.iterEnd) - 1
}

// Token records a token of s sampled at the end of iteration k.
func (r *Recorder) Token(s *Seq, k int) {
	q := &s.rec
	switch {
	case !q.started:
		q.started, q.first, q.runStart = true, r.iterEnd[k], -1
	case int(q.lastIter) == k-1:
		if q.runStart < 0 {
			q.runStart = int32(k)
		}
	default:
		q.gaps = append(q.gaps, r.iterEnd[k]-r.iterEnd[q.lastIter])
		if q.runStart >= 0 {
			q.runs = append(q.runs, q.runStart, q.lastIter)
			q.runStart = -1
		}
	}
	q.lastIter = int32(k)
}

// Finish records that s completed with its last token.
func (r *Recorder) Finish(s *Seq) {
	q := &s.rec
	end := r.iterEnd[q.lastIter]
	r.at(end)
	if q.runStart >= 0 {
		q.runs = append(q.runs, q.runStart, q.lastIter)
	}
	for i := 0; i < len(q.runs); i += 2 {
		r.diff[q.runs[i]]++
		r.diff[q.runs[i+1]+1]--
	}
	r.gaps = append(r.gaps, q.gaps...)
	ttft, e2e := q.first-s.Req.Arrival, end-s.Req.Arrival
	tpot := math.NaN()
	if s.Generated > 1 {
		tpot = (e2e - ttft) / float64(s.Generated-1)
	}
	r.ttft, r.e2e, r.tpot = append(r.ttft, ttft), append(r.e2e, e2e), append(r.tpot, tpot)
	r.sum.Completed++
	r.sum.InputTokens += int64(s.Req.Prompt)
	r.sum.OutputTokens += int64(s.Generated)
	*q = seqRecord{}
}

// Cancel records that s was cancelled at time t (its tokens do not count).
func (r *Recorder) Cancel(s *Seq, t float64) {
	r.at(t)
	r.sum.Cancelled++
	s.rec = seqRecord{}
}

// Reject records that s was turned away at time t.
func (r *Recorder) Reject(s *Seq, t float64) {
	r.at(t)
	r.sum.Rejected++
}

// TTFT returns the completed requests' times to first token (seconds).
func (r *Recorder) TTFT() []float64 { return slices.Clone(r.ttft) }

// E2E returns the completed requests' end-to-end latencies (seconds).
func (r *Recorder) E2E() []float64 { return slices.Clone(r.e2e) }

// Summary computes the metrics, with goodput against slo.
func (r *Recorder) Summary(slo SLO) Summary {
	s := r.sum
	s.Duration = r.last - r.first
	good := 0
	for i := range r.ttft {
		tpot := r.tpot[i]
		if math.IsNaN(tpot) {
			tpot = 0
		}
		if (slo.TTFT == 0 || r.ttft[i] <= slo.TTFT) && (slo.TPOT == 0 || tpot <= slo.TPOT) && (slo.E2E == 0 || r.e2e[i] <= slo.E2E) {
			good++
		}
	}
	s.GoodRequests = good
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.OutputThroughput = float64(s.OutputTokens) / s.Duration
		s.TotalTokenThroughput = float64(s.InputTokens+s.OutputTokens) / s.Duration
		s.Goodput = float64(good) / s.Duration
	}
	s.TTFT = distOf(r.ttft)
	s.E2E = distOf(r.e2e)
	var tp []float64
	for _, v := range r.tpot {
		if !math.IsNaN(v) {
			tp = append(tp, v)
		}
	}
	s.TPOT = distOf(tp)
	s.ITL = distWeighted(r.itlRuns())
	return s
}

// weighted is a value that occurs Count times.
type weighted struct {
	V     float64
	Count int64
}

// itlRuns lists the pooled inter-token gaps with their multiplicities.
func (r *Recorder) itlRuns() []weighted {
	var out []weighted
	var c int64
	for k := range r.iterEnd {
		c += int64(r.diff[k])
		if c > 0 {
			out = append(out, weighted{r.iterEnd[k] - r.iterEnd[k-1], c})
		}
	}
	for _, g := range r.gaps {
		out = append(out, weighted{g, 1})
	}
	return out
}

func distOf(x []float64) Dist {
	w := make([]weighted, len(x))
	for i, v := range x {
		w[i] = weighted{v, 1}
	}
	return distWeighted(w)
}

// distWeighted summarises values with multiplicities as numpy would the
// expanded array.
func distWeighted(w []weighted) Dist {
	var n int64
	var sum float64
	for _, x := range w {
		n += x.Count
		sum += x.V * float64(x.Count)
	}
	if n == 0 {
		return Dist{} // numpy's "or 0": an empty list summarises as zeros
	}
	mean := sum / float64(n)
	var ss float64
	for _, x := range w {
		d := x.V - mean
		ss += d * d * float64(x.Count)
	}
	sortWeighted(w)
	return Dist{
		N: int(n), Mean: mean, Std: math.Sqrt(ss / float64(n)),
		Median: percentile(w, n, 50), P90: percentile(w, n, 90), P99: percentile(w, n, 99),
	}
}

// percentile is numpy's linear percentile of the sorted weighted values.
func percentile(w []weighted, n int64, p float64) float64 {
	h := float64(n-1) * p / 100
	lo := int64(math.Floor(h))
	a, b := rank(w, lo), rank(w, min(lo+1, n-1))
	return a + (h-float64(lo))*(b-a)
}

// rank is the value at 0-based position i of the expanded sorted values.
func rank(w []weighted, i int64) float64 {
	for _, x := range w {
		if i < x.Count {
			return x.V
		}
		i -= x.Count
	}
	return w[len(w)-1].V
}

func sortWeighted(w []weighted) {
	slices.SortFunc(w, func(a, b weighted) int { return cmp.Compare(a.V, b.V) })
}
