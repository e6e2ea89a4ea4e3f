package dataparallel

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/parallel"
	"gptlab/reports"
)

// report writes rank 0's report: the job, exactness, parameters after K
// steps, losses, bytes, optimizer state, step times.
func (d *dpResult) report(r *reports.Report) {
	cfg, P, n := d.cfg, len(d.sums), d.p.Count()
	N := int64(4 * n) // gradient bytes
	mpi := d.transport == "mpi"
	job := r.AddTable("The job", reports.Text("what"), reports.Text("value"))
	job.Row("ranks, transport", fmt.Sprintf("%d processes over %s", P, d.transport))
	job.Row("model", fmt.Sprintf("%s: %d parameters, gradient N = %s", cfg.Config, n, reports.FormatBytes(float64(N))))
	job.Row("global batch", fmt.Sprintf("%d sequences of %d tokens: %s per rank (unequal case: %s)",
		cfg.Batch, d.p.Config().Block, splitText(d.equal), splitText(d.unequal)))
	job.Row("training", fmt.Sprintf("%d AdamW steps at lr %g, no gradient clipping, same seed and batches on every rank",
		cfg.Steps, cfg.LR))
	job.Row("buckets", fmt.Sprintf("%s: %d all-reduce(s) a step, each started when its last gradient is final",
		d.timings[0].plan.name, d.dp.buckets))

	d.exactness(r)
	d.parameters(r)
	d.losses(r)
	d.bytes(r, N, mpi)
	d.state(r, n)
	d.times(r, N)
	addSweeps(r, []*Sweep{d.allreduce}, true)

	r.Note("The flat gradient each bucket is a slice of is the lab's own buffer, outside the arena: no op of the " +
		"step ever writes it, so an all-reduce in flight needs no happens-before edge in the planner (the issue's " +
		"edge and its byte-pattern test apply to buckets staged in arena buffers, which this lab does not use).")
	r.Note("CPU processes on one machine: the figures teach the algebra of data parallelism and the bytes it " +
		"moves; the step times are of 2 CPU processes sharing this machine's cores and say nothing about GPU scaling.")
}

func splitText(s dpSplit) string {
	parts := make([]string, len(s.n))
	for i, k := range s.n {
		parts[i] = fmt.Sprint(k)
	}
	return strings.Join(parts, "+")
}

// exactness: the first step's reduced gradient against the full batch's.
func (d *dpResult) exactness(r *reports.Report) {
	eq, eqAt := maxRelDiff(d.p, d.dp.first, d.ref.first)
	un, unAt := maxRelDiff(d.p, d.weighted, d.ref.first)
	pl, plAt := maxRelDiff(d.p, d.plain, d.ref.first)
	t := r.AddTable("The first step's reduced gradient against one process on the full batch",
		reports.Text("shards"), reports.Text("each rank's weight"), reports.Significant("max rel diff", 2),
		reports.Text("worst tensor"), reports.Text("bound"))
	t.Row(splitText(d.equal), "n_r/N", eq, eqAt, fmt.Sprintf("≤ %g", dpGradTol))
	t.Row(splitText(d.unequal), "n_r/N (sample count)", un, unAt, fmt.Sprintf("≤ %g", dpGradTol))
	t.Row(splitText(d.unequal), fmt.Sprintf("1/%d (plain average)", len(d.sums)), pl, plAt, fmt.Sprintf("≥ %g: wrong", dpControlMin))
	t.Note("max rel diff: the largest over parameter tensors of ‖g_dp − g_full‖₂ / ‖g_full‖₂. Each rank's loss is " +
		"the mean over its own tokens, so its gradient counts for n_r/N of the full batch's; averaging gives " +
		"every rank 1/P, which is right only for equal shards.")
	r.Metric("max_rel_diff_equal", eq)
	r.Metric("max_rel_diff_unequal", un)
	r.Metric("max_rel_diff_plain_average", pl)
	r.Check("equal shards: reduced gradient = full batch's", eq <= dpGradTol,
		"max rel diff %.3g (%s), bound %g", eq, eqAt, dpGradTol)
	r.Check("unequal shards weighted by sample count = full batch's", un <= dpGradTol,
		"max rel diff %.3g (%s), bound %g", un, unAt, dpGradTol)
	r.Check("unequal shards, plain average: wrong (negative control)", pl >= dpControlMin,
		"max rel diff %.3g (%s), want at least %g", pl, plAt, dpControlMin)
}

// parameters: after K steps, across ranks, against one process, ZeRO-1.
func (d *dpResult) parameters(r *reports.Report) {
	n := d.p.Count()
	q := compareParams(d.dp.final, d.ref.final, d.ref.first, d.cfg.LR)
	t := r.AddTable(fmt.Sprintf("Parameters after %d steps", d.cfg.Steps),
		reports.Text("comparison"), reports.Int("elements"), reports.Int("off"),
		reports.Significant("max |diff|", 2), reports.Text("bound"))
	differ, zero := 0, 0
	for _, s := range d.sums[1:] {
		t.Row(fmt.Sprintf("DP: rank %d vs rank 0", s.Rank), n, s.Differ, math.NaN(), "bitwise")
		differ += s.Differ
	}
	t.Row("DP vs 1 process, |g₁| ≥ 1e-6", q.tight, q.overTight, q.worstTight, fmt.Sprintf("%g", dpParamTol))
	t.Row("DP vs 1 process, |g₁| < 1e-6", q.loose, q.overLoose, q.worstLoose, fmt.Sprintf("3·lr = %g", 3*d.cfg.LR))
	vs := "DP"
	if d.zeroOneBucket {
		vs = "DP of 1 bucket"
		t.Note("On more than 2 ranks a bucket's all-reduce sums an element in another order than ZeRO-1's " +
			"reduce-scatter of the whole gradient, so ZeRO-1 is compared with plain DP of one bucket.")
	}
	for _, s := range d.sums {
		t.Row(fmt.Sprintf("ZeRO-1 vs %s, rank %d", vs, s.Rank), n, s.ZeroDiffer, math.NaN(), "bitwise")
		zero += s.ZeroDiffer
	}
	t.Notes = append([]string{"off: elements that differ (bitwise rows) or exceed the bound. g₁ is the full batch's " +
		"first gradient: where it is tiny, AdamW's first step lr·g/(|g|+eps) is set by rounding, not by the gradient."}, t.Notes...)
	r.Metric("param_max_abs_diff", q.worstTight)
	r.Check("DP: every rank's parameters bitwise rank 0's", differ == 0,
		"%d elements differ over %d other ranks (rank 0's broadcast)", differ, len(d.sums)-1)
	r.Check(fmt.Sprintf("DP within %g of one process after %d steps", dpParamTol, d.cfg.Steps),
		q.overTight == 0 && q.overLoose == 0,
		"|g₁| ≥ %g: %d of %d beyond %g (worst %.3g); smaller: %d of %d beyond 3·lr (worst %.3g)",
		dpSmallGrad, q.overTight, q.tight, dpParamTol, q.worstTight, q.overLoose, q.loose, q.worstLoose)
	r.Check("ZeRO-1 parameters bitwise plain DP's", zero == 0, "%d elements differ over %d ranks", zero, len(d.sums))
}

// losses: the data-parallel loss (the ranks' losses weighted by their
// shares) beside the single process's.
func (d *dpResult) losses(r *reports.Report) {
	t := r.AddTable("Training loss per step", reports.Int("step"), reports.Float("1 process", 6),
		reports.Float("DP: Σ_r (n_r/N)·loss_r", 6), reports.Significant("|diff|", 2))
	for k, want := range d.ref.losses {
		got := 0.0
		for _, s := range d.sums {
			got += float64(d.equal.weight(s.Rank)) * s.Losses[k]
		}
		t.Row(k+1, want, got, math.Abs(got-want))
	}
}

// bytes: payload each rank sent per step against the ring model.
func (d *dpResult) bytes(r *reports.Report, N int64, mpi bool) {
	P := len(d.sums)
	ring := parallel.RingBytes(N, P)
	half := ring / 2 // reduce-scatter or all-gather alone: (p-1)/p·N
	t := r.AddTable("Bytes each rank sent per step (payload, parallel.Stats) against the ring model",
		reports.Int("rank"), reports.Text("scheme"), reports.Text("collective"), reports.Int("calls/step"),
		reports.Bytes("sent/step"), reports.Bytes("model"), reports.Ratio("worst sent/model"))
	worst := map[string]float64{}
	callsOK := true
	for _, s := range d.sums {
		for _, row := range []struct {
			scheme string
			kind   parallel.Kind
			moved  []parallel.Stats
			model  float64
			calls  int64 // of this collective a step
			all    int64 // of every collective a step
		}{
			{"DP", parallel.AllReduce, s.Moved, ring, int64(d.dp.buckets), int64(d.dp.buckets)},
			{"ZeRO-1", parallel.ReduceScatter, s.ZeroMoved, half, 1, 2},
			{"ZeRO-1", parallel.AllGather, s.ZeroMoved, half, 1, 2},
		} {
			dev, ratio := 0.0, 1.0
			for _, st := range row.moved {
				c := st.Of(row.kind)
				if c.Calls != row.calls || st.Total().Calls != row.all {
					callsOK = false
				}
				x := float64(c.Sent) / row.model
				if e := math.Abs(x - 1); e >= dev {
					dev, ratio = e, x
				}
			}
			c := row.moved[0].Of(row.kind)
			sent, rt := float64(c.Sent), ratio
			if mpi {
				sent, rt = math.NaN(), math.NaN()
			}
			t.Row(s.Rank, row.scheme, row.kind.String(), c.Calls, sent, row.model, rt)
			worst[row.scheme] = max(worst[row.scheme], dev)
		}
	}
	t.Note("model: all-reduce 2(p-1)/p·N, reduce-scatter and all-gather (p-1)/p·N each, N = %s of gradient "+
		"(ZeRO-1's all-gather moves the updated parameters, as many bytes). calls/step and sent/step are of the "+
		"first step; the ratio is the worst step's.", reports.FormatBytes(float64(N)))
	r.Metric("model_bytes_per_rank", ring)
	r.Check("every step issues exactly its collectives on every rank", callsOK,
		"DP: %d all-reduces (one per bucket); ZeRO-1: one reduce-scatter and one all-gather; nothing else", d.dp.buckets)
	if mpi {
		t.Note("Under MPI the bytes are OpenMPI's to move and are not counted: sent is not measured.")
		r.Metric("bytes_sent_per_rank", math.NaN())
		return
	}
	r.Metric("bytes_sent_per_rank", d.sums[0].Moved[0].Of(parallel.AllReduce).Sent)
	r.Metric("zero1_bytes_sent_per_rank", d.sums[0].ZeroMoved[0].Total().Sent)
	r.Check("DP: bytes sent per rank = 2(p-1)/p·N within 1%, every step", worst["DP"] <= dpBytesTol,
		"worst step %.3g%% off the model's %.0f bytes, over %d ranks", 100*worst["DP"], ring, P)
	r.Check("ZeRO-1: reduce-scatter and all-gather = (p-1)/p·N each within 1%", worst["ZeRO-1"] <= dpBytesTol,
		"worst step %.3g%% off the model's %.0f bytes each, over %d ranks", 100*worst["ZeRO-1"], half, P)
}

// state: AdamW's moments per rank, unsharded and ZeRO-1.
func (d *dpResult) state(r *reports.Report, n int) {
	t := r.AddTable("AdamW state per rank (the moments m and v)", reports.Text("scheme"), reports.Int("rank"),
		reports.Int("elements updated"), reports.Bytes("state"), reports.Ratio("/ unsharded"))
	dpState := d.sums[0].DPState
	t.Row("DP (unsharded)", 0, n, dpState, 1.0)
	var total, worst int64
	ok := true
	for _, s := range d.sums {
		t.Row("ZeRO-1", s.Rank, s.Hi-s.Lo, s.ZeroState, lab.Ratio(s.ZeroState, dpState))
		total += s.ZeroState
		worst = max(worst, s.ZeroState)
		ok = ok && s.DPState == dpState && s.ZeroState == int64(8*(s.Hi-s.Lo))
	}
	P := int64(len(d.sums))
	// 1/P of the unsharded state, up to one element's 8 bytes of rounding
	ok = ok && total == dpState && worst*P-dpState < 8*P
	r.Metric("optimizer_state_bytes_per_rank_dp", dpState)
	r.Metric("optimizer_state_bytes_per_rank_zero1", worst)
	r.Check("ZeRO-1: AdamW state per rank = 1/P of unsharded", ok,
		"largest rank %d bytes × %d ranks vs unsharded %d (sum over ranks %d)", worst, P, dpState, total)
}

// times: step time by bucket plan, with and without overlap.
func (d *dpResult) times(r *reports.Report, N int64) {
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	t := r.AddTable(fmt.Sprintf("Step time in ms by bucket plan: rank 0, median of %d interleaved steps each", d.cfg.TimedSteps),
		reports.Text("buckets of"), reports.Int("buckets"), reports.Float("compute", 2),
		reports.Float("no overlap", 2), reports.Float("overlap", 2), reports.Float("exposed", 2),
		reports.Float("saved", 2))
	overlapOK := true
	for _, x := range d.timings {
		t.Row(x.plan.name, x.buckets, ms(x.local), ms(x.noOverlap), ms(x.overlap), ms(x.noOverlap-x.local),
			ms(x.noOverlap-x.overlap))
		if x.buckets > 1 && x.toCome == 0 {
			overlapOK = false
		}
	}
	t.Note("A step is forward, backward, gradient reduction and AdamW. compute: the same step with no " +
		"communication; no overlap: the same buckets all-reduced after the backward; overlap: each bucket's " +
		"all-reduce started as soon as its last gradient is final, while the backward goes on. exposed: no " +
		"overlap − compute (the communication's cost); saved: no overlap − overlap. Many tiny " +
		"buckets pay a collective's latency again and again; one bucket for everything can only start after " +
		"the backward, so it cannot overlap.")
	slower, several := 0, 0
	for _, x := range d.timings {
		if x.buckets > 1 {
			several++
			if x.overlap > x.noOverlap {
				slower++
			}
		}
	}
	if slower > 0 { // why, only when it happened
		t.Note("In this run overlap was slower than no overlap in %d of the %d plans of several buckets. The %d ranks' "+
			"backward passes share this machine's %d CPUs, and a collective here is CPU work on those same CPUs "+
			"(copies, sums and polling waits): started early, it takes CPU from the backward it runs beside. What "+
			"overlap can hide is the time a collective waits, not the work it does.",
			slower, several, len(d.sums), runtime.NumCPU())
	}
	set := d.timings[0]
	r.Metric("step_ms_overlap", ms(set.overlap))
	r.Metric("step_ms_no_overlap", ms(set.noOverlap))
	r.Metric("step_ms_compute", ms(set.local))
	detail := make([]string, 0, len(d.timings))
	for _, x := range d.timings {
		if x.buckets > 1 {
			detail = append(detail, fmt.Sprintf("%s: %d of %d", x.plan.name, x.toCome, d.dp.params))
		}
	}
	r.Check("overlap: the first all-reduce starts while the backward still runs", overlapOK,
		"gradients still to come when it started: %s", strings.Join(detail, "; "))
	d.timeFigure(r, N)
}

// timeFigure draws step time against the bucket cap (the sweep's plans).
func (d *dpResult) timeFigure(r *reports.Report, N int64) {
	p := plot.New()
	p.Title.Text = "Data-parallel step time by bucket cap"
	p.X.Label.Text = "bucket cap (bytes)"
	p.Y.Label.Text = "step (ms)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	for i, line := range []struct {
		name string
		y    func(dpTiming) time.Duration
	}{
		{"no overlap", func(x dpTiming) time.Duration { return x.noOverlap }},
		{"overlap", func(x dpTiming) time.Duration { return x.overlap }},
		{"compute only", func(x dpTiming) time.Duration { return x.local }},
	} {
		var pts plotter.XYs
		for _, x := range d.timings[1:] {
			pts = append(pts, plotter.XY{X: float64(min(int64(x.plan.cap), N)), Y: float64(line.y(x).Microseconds()) / 1000})
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			continue
		}
		l.Color, sc.Color = sweepColors[i], sweepColors[i]
		p.Add(l, sc)
		p.Legend.Add(line.name, l, sc)
	}
	p.Add(plotter.NewGrid())
	r.AddFigure("data-parallel-buckets", p, 16*vg.Centimeter, 10*vg.Centimeter)
}
