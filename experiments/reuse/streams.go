package reuse

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"gptlab/planner"
	"gptlab/reports"
)

// reuseStreams plans the branched graph with its narrow branch (conv1x1,
// gelu) on a second stream: the chapter's rule for asynchronous streams,
// "replace simple list positions with happens-before reasoning". Each
// value's interval then starts at the first position of an op that may run
// beside its writer; every planner's plan is checked against the order
// itself and by simulated interleavings, and the plan made for one stream
// is shown to race.
func reuseStreams(ctx context.Context, r *reports.Report, algos []planner.Algorithm, align int64) error {
	one := planner.Branched(false)
	two := planner.Branched(false)
	two.Ops = slices.Clone(two.Ops)
	for i, op := range two.Ops {
		if op.Fn == "conv1x1" || op.Fn == "gelu" {
			two.Ops[i].Stream = 1
		}
	}
	oneTemps, err := one.Temps()
	if err != nil {
		return err
	}
	twoTemps, err := two.Temps()
	if err != nil {
		return err
	}
	ord, err := two.Order()
	if err != nil {
		return err
	}
	lt := r.AddTable("Branched graph on two streams: conv1x1 and gelu on stream 1, the rest on stream 0",
		reports.Int("step"), reports.Text("op"), reports.Int("stream"), reports.Text("writes"), reports.Text("may run beside"),
		reports.Text("in use, one stream"), reports.Text("in use, two streams"))
	for i, op := range two.Ops {
		var beside []string
		for j := range two.Ops {
			if ord.Concurrent(i, j) {
				beside = append(beside, two.Ops[j].Fn)
			}
		}
		if len(beside) == 0 {
			beside = []string{"-"}
		}
		span := func(ts []planner.Temp) string { return fmt.Sprintf("[%d, %d]", ts[i].First, ts[i].Last) }
		lt.Row(i, op.Fn, op.Stream, op.Out, strings.Join(beside, ", "), span(oneTemps), span(twoTemps))
	}
	lt.Note("In use: from the first position of an op that may run beside the writer to the last reader (inclusive; a view's are its own, its reads keep the viewed value alive). An op may run beside another when neither happens before the other: no path of stream order and reads leads from one to the other.")
	pr, _, err := two.Problem(align)
	if err != nil {
		return err
	}
	plans, err := reuseTable(ctx, r, "Branched graph on two streams", pr, algos)
	if err != nil {
		return err
	}
	held := 0
	for _, pp := range plans {
		if two.VerifyOrder(pr, pp.plan) == nil && two.SimulateStreams(pr, pp.plan, streamInterleavings, 1) == nil {
			held++
		}
	}
	r.Check("branched graph on two streams: every plan holds by happens-before", held == len(plans),
		"%d of %d planners' plans: every two buffers sharing bytes ordered by happens-before, and %d simulated interleavings of the streams",
		held, len(plans), streamInterleavings)
	// The plan made for one stream, run on two.
	p1, _, err := one.Problem(align)
	if err != nil {
		return err
	}
	oneBest, err := reusePlanAll(ctx, "branched graph, one stream", p1, reuseNamed("search"))
	if err != nil {
		return err
	}
	race := two.VerifyOrder(p1, oneBest[0].plan)
	sim := two.SimulateStreams(p1, oneBest[0].plan, streamInterleavings, 1)
	r.Check("branched graph on two streams: the one-stream plan races", race != nil && sim != nil,
		"%s's plan for one stream (%s) on two: %s; simulated: %s", oneBest[0].algo.Name, planner.FormatBytes(oneBest[0].plan.Peak),
		errOr(race, "VerifyOrder passes it"), errOr(sim, "no interleaving caught it"))
	best := slices.MinFunc(plans, func(a, b reusePlanned) int { return cmp.Compare(a.plan.Peak, b.plan.Peak) })
	r.Metric("branched_two_stream_best_peak_bytes", best.plan.Peak)
	r.Metric("branched_two_stream_bound_bytes", pr.Bound())
	return nil
}

// streamInterleavings is how many interleavings SimulateStreams runs.
const streamInterleavings = 16

// errOr is err's text, or what to say when it is nil.
func errOr(err error, none string) string {
	if err == nil {
		return none
	}
	return err.Error()
}
