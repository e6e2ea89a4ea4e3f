package cli

import (
	"fmt"
	"strings"
	"time"

	"gptlab/models"
	"gptlab/planner/arena"
	"gptlab/reports"
)

// timelineWaits is how many of the longest waits the note names.
const timelineWaits = 3

// benchTimeline adds, for a step on two streams, what each stream did in
// the median of runs timed runs of the forward and backward: its ops'
// time, its waits for the other stream and how much of them it spent
// helping it, when it finished; and the longest waits, by op. Nothing for
// a step on one stream.
func benchTimeline(r *reports.Report, m *models.Model, runs int) error {
	p := m.Arena()
	if c, ok := m.StreamChoice(); !ok || c.Chosen < 2 || p == nil {
		return nil
	}
	tl, err := p.Timeline(runs)
	if err != nil {
		return err
	}
	t := r.AddTable(fmt.Sprintf("The two streams in the median of %s of the forward and backward", reports.Count(runs, "timed run")),
		reports.Int("stream"), reports.Int("ops"), reports.Duration("busy", time.Millisecond, 3),
		reports.Duration("waiting", time.Millisecond, 3), reports.Duration("helping", time.Millisecond, 3),
		reports.Duration("finished at", time.Millisecond, 3), reports.Duration("then idle", time.Millisecond, 3))
	for s, st := range tl.Streams {
		t.Row(s, st.Ops, st.Busy, st.Waiting, st.Helping, st.Finished, tl.Run-st.Finished)
		r.Metric(fmt.Sprintf("stream%d_busy_ms", s), ms(st.Busy))
		r.Metric(fmt.Sprintf("stream%d_waiting_ms", s), ms(st.Waiting))
		r.Metric(fmt.Sprintf("stream%d_helping_ms", s), ms(st.Helping))
	}
	r.Metric("timeline_run_ms", ms(tl.Run))
	var long []string
	for _, w := range tl.Waits[:min(timelineWaits, len(tl.Waits))] {
		long = append(long, fmt.Sprintf("stream %d waited %v before %s (step %d) for stream %d's %s (step %d)",
			w.Stream, w.Time.Round(10*time.Microsecond), w.Op, w.Step, 1-w.Stream, w.ForOp, w.For))
	}
	waits := fmt.Sprintf("No op waited as long as %v for the other stream.", arena.MinWait)
	if len(long) > 0 {
		waits = fmt.Sprintf("The longest waits (medians): %s.", strings.Join(long, "; "))
	}
	t.Note("Busy is the stream's own ops (each timed by two clock reads), waiting the time its ops waited for the other stream's, helping the part of that wait it spent running chunks of the other stream's split kernels; the run took %v. %s",
		tl.Run.Round(10*time.Microsecond), waits)
	return nil
}
