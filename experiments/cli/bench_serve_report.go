package cli

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/reports"
	"gptlab/serving"
	"gptlab/serving/loadgen"
)

// benchServeReport is bench serve's report: counts and throughputs,
// vLLM's latency table, the failures by cause, two figures.
func benchServeReport(target string, bc *benchServeConfig, reqs []serving.Request, res *loadgen.Result) *reports.Report {
	slo := serving.SLO{TTFT: bc.SLOTTFT.Seconds(), TPOT: bc.SLOTPOT.Seconds()}
	s := res.Summary(slo)
	r := reports.New("bench-serve", fmt.Sprintf("Serving benchmark: %s at %s", res.Model, target))
	r.Config = lab.Values(bc)
	r.Config.Set("url", target)
	r.Config.Set("model", res.Model)
	if bc.Trace != "" {
		for _, k := range []string{"rate", "cv", "requests", "prompt", "output"} {
			r.Config.Set(k, "trace") // the trace gives them
		}
	}
	failed := s.Requests - s.Completed - s.Cancelled
	r.Metric("requests", s.Requests)
	r.Metric("completed_requests", s.Completed)
	r.Metric("failed_requests", failed)
	r.Metric("cancelled_requests", s.Cancelled)
	r.Metric("duration_s", s.Duration)
	r.Metric("request_throughput_per_s", s.RequestThroughput)
	r.Metric("output_tokens_per_s", s.OutputThroughput)
	r.Metric("total_tokens_per_s", s.TotalTokenThroughput)
	r.Metric("goodput_per_s", s.Goodput)
	r.Metric("input_tokens", s.InputTokens)
	r.Metric("output_tokens", s.OutputTokens)
	t := r.AddTable("Requests and throughput", reports.Text("measure"), reports.Significant("value", 4), reports.Text("unit"))
	t.Row("requests", s.Requests, "")
	t.Row("completed", s.Completed, "")
	t.Row("failed", failed, "")
	t.Row("cancelled by the workload", s.Cancelled, "")
	t.Row("duration", s.Duration, "s")
	t.Row("input tokens", s.InputTokens, "")
	t.Row("output tokens", s.OutputTokens, "")
	t.Row("request throughput", s.RequestThroughput, "requests/s")
	t.Row("output token throughput", s.OutputThroughput, "tokens/s")
	t.Row("total token throughput", s.TotalTokenThroughput, "tokens/s")
	t.Row(fmt.Sprintf("goodput (TTFT ≤ %v, TPOT ≤ %v)", bc.SLOTTFT, bc.SLOTPOT), s.Goodput, "requests/s")
	lat := r.AddTable("Latency (ms)", reports.Text("metric"), reports.Int("n"), reports.Float("mean", 2),
		reports.Float("p50", 2), reports.Float("p90", 2), reports.Float("p99", 2), reports.Float("std", 2))
	for _, m := range []struct {
		name string
		d    serving.Dist
	}{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}, {"E2E", s.E2E}} {
		ms := func(v float64) float64 { return v * 1000 }
		lat.Row(m.name, m.d.N, ms(m.d.Mean), ms(m.d.Median), ms(m.d.P90), ms(m.d.P99), ms(m.d.Std))
		for _, q := range []struct {
			k string
			v float64
		}{{"mean", m.d.Mean}, {"p50", m.d.Median}, {"p90", m.d.P90}, {"p99", m.d.P99}} {
			r.Metric(fmt.Sprintf("%s_%s_ms", strings.ToLower(m.name), q.k), ms(q.v))
		}
	}
	if f := res.Failures(); len(f) > 0 {
		ft := r.AddTable("Failed requests by cause", reports.Int("requests"), reports.Text("cause"))
		for _, x := range f {
			ft.Row(x.Count, x.Cause)
		}
	}
	benchServeChecks(r, reqs, res, s)
	latencyFigure(r, res)
	timelineFigure(r, res)
	r.Note("Metrics are vLLM's benchmark_serving.py's, from the client's side and computed by serving's Recorder: TTFT from sending a request to its first chunk with a choice; ITL every gap between consecutive chunks; TPOT = (E2E − TTFT)/(output tokens − 1) per request, the tokens from the server's usage; E2E to the last chunk. Only completed requests count in the latencies and throughputs; the duration runs from the first request sent to the last one's end. Goodput counts completed requests meeting every SLO, per second of it.")
	r.Note("Each request streams with stream_options.include_usage and ignore_eos, max_tokens its output length; a text prompt is random characters of %q, one token each on a character-level model (the server's usage gives the prompt's real count). Timings on a shared machine are noisy.", bc.Alphabet)
	return r
}

// benchServeChecks are what can go wrong in the run itself: a request
// lost, or a completion cut short of its max_tokens.
func benchServeChecks(r *reports.Report, reqs []serving.Request, res *loadgen.Result, s serving.Summary) {
	r.Check("every request accounted for", s.Completed+s.Cancelled+s.Rejected == len(reqs) && s.Requests == len(reqs),
		"%d sent: %d completed + %d cancelled + %d failed", len(reqs), s.Completed, s.Cancelled, s.Rejected)
	r.Check("some request completed", s.Completed > 0, "%d of %d requests completed: there is something to measure", s.Completed, len(reqs))
	var short []string
	for i := range res.Outcomes {
		o := &res.Outcomes[i]
		if o.Completed() && o.OutputTokens != reqs[i].Output && len(short) < 3 {
			short = append(short, fmt.Sprintf("request %d: %d of %d", o.ID, o.OutputTokens, reqs[i].Output))
		}
	}
	r.Check("completed requests ran to max_tokens", len(short) == 0,
		"every completed request's usage.completion_tokens equals its max_tokens (ignore_eos)%s", listed(short))
}

func listed(items []string) string {
	if len(items) == 0 {
		return ""
	}
	return "; not: " + fmt.Sprint(items)
}

var benchColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}}

// latencyFigure draws the CDFs of TTFT and E2E over completed requests.
func latencyFigure(r *reports.Report, res *loadgen.Result) {
	var ttft, e2e []float64
	for i := range res.Outcomes {
		if o := &res.Outcomes[i]; o.Completed() {
			ttft = append(ttft, (o.Chunks[0]-o.Sent)*1000)
			e2e = append(e2e, (o.Chunks[len(o.Chunks)-1]-o.Sent)*1000)
		}
	}
	if len(ttft) == 0 {
		return
	}
	p := plot.New()
	p.Title.Text = "Latency of completed requests (CDF)"
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "fraction of requests"
	p.Legend.Top, p.Legend.Left = false, false
	for k, series := range []struct {
		name string
		v    []float64
	}{{"TTFT", ttft}, {"E2E", e2e}} {
		slices.Sort(series.v)
		pts := make(plotter.XYs, len(series.v))
		for i, v := range series.v {
			pts[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(series.v))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.Color = benchColors[k]
		p.Add(l)
		p.Legend.Add(series.name, l)
	}
	p.Add(plotter.NewGrid())
	r.AddFigure("bench-serve-latency", p, 16*vg.Centimeter, 10*vg.Centimeter)
}

// timelineFigure draws each request's TTFT and E2E against when it was
// sent: queueing shows as latency rising over the run.
func timelineFigure(r *reports.Report, res *loadgen.Result) {
	var ttft, e2e plotter.XYs
	for i := range res.Outcomes {
		if o := &res.Outcomes[i]; o.Completed() {
			ttft = append(ttft, plotter.XY{X: o.Sent, Y: (o.Chunks[0] - o.Sent) * 1000})
			e2e = append(e2e, plotter.XY{X: o.Sent, Y: (o.Chunks[len(o.Chunks)-1] - o.Sent) * 1000})
		}
	}
	if len(ttft) == 0 {
		return
	}
	p := plot.New()
	p.Title.Text = "Latency by the time each request was sent"
	p.X.Label.Text = "sent at (s)"
	p.Y.Label.Text = "latency (ms)"
	p.Legend.Top = true
	for k, series := range []struct {
		name string
		pts  plotter.XYs
	}{{"TTFT", ttft}, {"E2E", e2e}} {
		sc, err := plotter.NewScatter(series.pts)
		if err != nil {
			continue
		}
		sc.Color = benchColors[k]
		sc.Radius = vg.Points(1.5)
		p.Add(sc)
		p.Legend.Add(series.name, sc)
	}
	p.Add(plotter.NewGrid())
	r.AddFigure("bench-serve-timeline", p, 16*vg.Centimeter, 10*vg.Centimeter)
}
