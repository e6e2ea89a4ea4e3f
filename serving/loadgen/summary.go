package loadgen

import (
	"cmp"
	"fmt"
	"slices"

	"gptlab/serving"
)

// Summary computes the run's serving metrics with serving's Recorder, as
// benchmark_serving.py defines them: the outcomes are replayed in the
// order of their times, each chunk a token event. A request's arrival is
// the moment it was sent, its output tokens the server's count (usage).
// Requests that failed are counted as rejected, those the workload
// cancelled as cancelled; neither counts in the latencies.
func (r *Result) Summary(slo serving.SLO) serving.Summary {
	type event struct {
		t    float64
		o    int // outcome index
		kind int // 0 arrival, 1 chunk, 2 end
	}
	var evs []event
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		evs = append(evs, event{o.Sent, i, 0})
		if o.Completed() {
			for _, t := range o.Chunks {
				evs = append(evs, event{t, i, 1})
			}
		}
		evs = append(evs, event{o.End, i, 2})
	}
	slices.SortStableFunc(evs, func(a, b event) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.kind, b.kind)
	})
	rec := serving.NewRecorder()
	seqs := make([]*serving.Seq, len(r.Outcomes))
	for _, e := range evs {
		o := &r.Outcomes[e.o]
		switch e.kind {
		case 0:
			seqs[e.o] = serving.NewSeq(&serving.Request{ID: o.ID, Arrival: o.Sent, Prompt: max(o.PromptTokens, 1), Output: max(o.OutputTokens, 1)})
			rec.Arrive(seqs[e.o])
		case 1:
			rec.Token(seqs[e.o], rec.Iteration(e.t))
		case 2:
			switch s := seqs[e.o]; {
			case o.Completed():
				s.Generated = o.OutputTokens
				rec.Finish(s)
			case o.Cancelled:
				rec.Cancel(s, o.End)
			default:
				rec.Reject(s, o.End)
			}
		}
	}
	return rec.Summary(slo)
}

// Failures counts the failed requests by cause (the status and message,
// or the transport's error), most frequent first.
func (r *Result) Failures() []Failure {
	counts := map[string]int{}
	for i := range r.Outcomes {
		o := &r.Outcomes[i]
		if o.Err != "" && !o.Cancelled {
			counts[o.Err]++
		}
	}
	var out []Failure
	for c, n := range counts {
		out = append(out, Failure{Cause: c, Count: n})
	}
	slices.SortFunc(out, func(a, b Failure) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Cause, b.Cause)
	})
	return out
}

// Failure is a cause of failed requests and how many failed of it.
type Failure struct {
	Cause string
	Count int
}

func (f Failure) String() string { return fmt.Sprintf("%d × %s", f.Count, f.Cause) }
