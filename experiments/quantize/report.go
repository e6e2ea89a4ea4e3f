package quantize

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gptlab/experiments/lab"
	"gptlab/internal/qgemm"
	"gptlab/models"
	"gptlab/planner/arena"
	"gptlab/precision"
	"gptlab/reports"
)

// Tolerances of the kernels against float32 on the dequantized weights.
const (
	// weight-only runs the float32 GEMM on Q·scale: float32 rounding.
	tolWeightOnly = 1e-5
	// dynamic also rounds each activation to one of 255 levels of its
	// row's max|x|/127: about (max|x|/127)/√12 per element, under 1% of
	// the row's norm for Gaussian rows; 2% stated.
	tolDynamic = 0.02
)

// Targets of the issue.
const (
	minSizeRatio = 3.85
	maxPPLDelta  = 0.001
	maxKL        = 2e-3
	minTop1      = 0.98
	minSQNRGap   = 3 // dB by which per-tensor must trail per-channel, on average
)

func (ql *quantizeLab) report(qual *qualityResult, mem []memRow, lat []*latencySet) *reports.Report {
	r := reports.New("quantize", fmt.Sprintf("int8 weight quantization of %s: quality, memory, latency", ql.cfg.Config))
	ql.qualityTables(r, qual)
	ql.memoryTables(r, mem, qual)
	for _, s := range lat {
		latencyTables(r, s)
	}
	ql.metricsAndChecks(r, qual, mem, lat)
	return r
}

// short is a parameter name without its prefix and suffix:
// "h.0.attn.c_attn".
func short(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, "transformer."), ".weight")
}

func (ql *quantizeLab) qualityTables(r *reports.Report, q *qualityResult) {
	t := r.AddTable("Quality against float32 on the validation split", reports.Text("scheme"), reports.Text("kernel"),
		reports.Float("ppl", 4), reports.Percent("Δppl", 3), reports.Significant("mean KL", 3), reports.Percent("top-1", 2),
		reports.Percent("greedy", 1), reports.Int("1st diff"), reports.Significant("vs deq.", 2))
	for _, row := range q.rows {
		t.Row(row.name, row.kernel.String(), row.ppl, row.ppl/q.pplF32-1, row.kl, row.top1, row.greedy, row.diverg, row.golden)
	}
	t.Note("Float32's perplexity is %.4f on %d batches of %d×%d tokens. KL is KL(p_f32 ‖ p_int8) of the next-token distributions, averaged over every position; top-1 is the share of positions whose most likely token is float32's; greedy is the share of a %d-token greedy continuation (KV-cached decoder) equal to float32's, 1st diff the first token that differs (%d: none). vs deq. is the int8 model's logits against the float32 model run on the dequantized weights Q·scale: max |Δ| for weight-only (the same float32 products), normwise for dynamic (activations quantized too). channel+head also quantizes the tied head, and so the token embedding.",
		q.pplF32, ql.cfg.EvalBatches, ql.tc.Model.Batch, ql.tc.Model.Block, ql.cfg.Greedy, ql.cfg.Greedy)

	s := r.AddTable("Weight SQNR per matrix (dB)", reports.Text("matrix"), reports.Text("shape"),
		reports.Float("channel", 1), reports.Float("tensor", 1), reports.Float("block32", 1))
	cq := ql.q[precision.Int8PerChannel]
	for i, n := range q.names {
		x := cq.Tensor(n)
		s.Row(short(n), fmt.Sprintf("%d×%d", x.Rows, x.Cols), q.sqnr[precision.Int8PerChannel][i], q.sqnr[precision.Int8PerTensor][i], q.sqnr[precision.Int8PerBlock32][i])
	}
	s.Row("mean", "", mean(q.sqnr[precision.Int8PerChannel]), mean(q.sqnr[precision.Int8PerTensor]), mean(q.sqnr[precision.Int8PerBlock32]))
	s.Note("SQNR = 10·log10(Σw² / Σ(w − q·scale)²) of each matrix against the trained float32 weights; %s, codes in [-127, 127], scale max|w|/127 per group.", precision.Int8Rounding)

	o := q.outlier
	ot := r.AddTable("One outlier's cost to its channel", reports.Text("scheme"), reports.Float("SQNR without", 1), reports.Float("SQNR with", 1), reports.Float("cost dB", 1))
	for _, sc := range []precision.Int8Scheme{precision.Int8PerChannel, precision.Int8PerBlock32} {
		ot.Row(sc.String(), o.without[sc], o.with[sc], o.without[sc]-o.with[sc])
	}
	ot.Note("Channel %d of %s, with weight %d set to %g× the channel's largest |w|: the SQNR of the channel's other weights. Per channel the outlier sets the scale of the whole channel; per block of 32 only of its block.", o.channel, short(o.tensor), o.at, o.factor)
}

func (ql *quantizeLab) memoryTables(r *reports.Report, mem []memRow, q *qualityResult) {
	w := r.AddTable("Weights by scheme", reports.Text("model"), reports.Bytes("linear"), reports.Ratio("smaller"), reports.Bytes("head"), reports.Bytes("whole model"))
	f := ql.f32.Bytes()
	w.Row("f32", f.Linear, 1.0, f.Head, f.Total())
	for _, s := range schemes {
		b := ql.q[s].Bytes()
		w.Row(s.String(), b.Linear, float64(f.Linear)/float64(b.Linear), b.Head, b.Total())
	}
	hb := ql.qHead.Bytes()
	w.Row("channel+head", hb.Linear, float64(f.Linear)/float64(hb.Linear), hb.Head, hb.Total())
	w.Note("Linear is the four matrices of every block (codes at one byte, scales at four); head is the token embedding the tied head reads; the whole model adds the position embedding, LayerNorms and biases (float32 in every model).")
	t := r.AddTable("Memory of evaluation", reports.Text("model"), reports.Bytes("weights held"), reports.Bytes("loaded (heap)"),
		reports.Bytes("f32 inputs"), reports.Bytes("int8 inputs"), reports.Bytes("arena"), reports.Bytes("planned"),
		reports.Bytes("resident (heap)"), reports.Bytes("peak (heap)"))
	for _, m := range mem {
		t.Row(m.name, m.held, m.loaded, m.inputs[arena.F32], m.inputs[arena.Int8], m.arena, m.planned(), m.resident, m.measured)
	}
	t.Note("One evaluation graph (B=%d, T=%d) loaded from its file. Weights held is what the loaded model holds by its own account: the float32 part, and for int8 the codes packed once for the kernels (internal/qgemm: panels of 16 channels, depth padded), their scales and -128·Σq per channel (for the u8·s8 kernels), and the scales as stored; loaded is the live heap after the load (after a GC), the same measured. The program's inputs by type (weights, scales; token ids aside) and its planned arena: planned = arena + every input. The graph's int8 inputs are the packed codes themselves, the one copy the kernels read. Measured, less what was live before the load: resident is the live heap after the evaluation with the model still held (after a GC: weights, graph, arena); peak the largest heap (runtime/metrics %s, sampled every ms, garbage included) over load, compile and %d batches.",
		ql.tc.Model.Batch, ql.tc.Model.Block, heapObjects, ql.cfg.EvalBatches)
}

func latencyTables(r *reports.Report, s *latencySet) {
	title := fmt.Sprintf("Latency p50, %s (embd %d, %d layers", s.name, s.cfg.Embd, s.cfg.Layers)
	if s.random {
		title += ", random weights"
	}
	title += ")"
	hasTorch := s.torchErr == nil
	cols := []reports.Column{reports.Text("layer"), reports.Int("M"), reports.Duration("f32", time.Microsecond, 1),
		reports.Duration("w-only", time.Microsecond, 1), reports.Duration("dynamic", time.Microsecond, 1), reports.Text("won"), reports.Ratio("int8/f32")}
	if hasTorch {
		cols = append(cols, reports.Duration("pt f32", time.Microsecond, 1), reports.Duration("pt int8", time.Microsecond, 1), reports.Ratio("ours/pt"))
	}
	t := r.AddTable(title, cols...)
	p95 := r.AddTable(strings.Replace(title, "p50", "p95", 1), cols[:5]...)
	row := func(layer string, M int, ours [3]timing, torch *[2]timing) {
		k, best := bestOf(ours)
		cells := []any{layer, M, ours[pathF32].p50, ours[pathWeightOnly].p50, ours[pathDynamic].p50, pathNames[k], ratio(best.p50, ours[pathF32].p50)}
		if hasTorch {
			cells = append(cells, torch[0].p50, torch[1].p50, ratio(best.p50, torch[1].p50))
		}
		t.Row(cells...)
		p95.Row(layer, M, ours[pathF32].p95, ours[pathWeightOnly].p95, ours[pathDynamic].p95)
	}
	for _, l := range s.layers {
		row(l.layer, l.M, l.ours, l.torch)
	}
	row("forward", s.cfg.Block, s.forward, s.torchFwd)
	dk, db := bestOf(s.decode)
	t.Note("%d runs each on %d thread(s), after warm-up; bias included, and for dynamic the activations' quantization. won is our faster int8 kernel, whose time int8/f32 and ours/pt use. forward is the whole model at B=1 over the block (M is the block). One decode step from the KV cache at position %d: f32 %v, weight-only %v, dynamic %v (p50; %s won, %.2fx f32). Kernels: %s.",
		s.runs, s.threads, s.cfg.Block-1, s.decode[pathF32].p50.Round(time.Microsecond/10), s.decode[pathWeightOnly].p50.Round(time.Microsecond/10),
		s.decode[pathDynamic].p50.Round(time.Microsecond/10), pathNames[dk], ratio(db.p50, s.decode[pathF32].p50), qgemm.Kernels())
	if hasTorch {
		t.Note("pt is PyTorch (../shared/peer/torch_infer.py int8, the same shapes with its own random weights, %d thread(s), OpenBLAS choosing its kernels): nn.Linear in f32 and torch.ao.quantization.quantize_dynamic (per-tensor int8 weights, engine %s).", s.threads, s.engine)
	} else {
		t.Note("PyTorch's columns are left out: %v", s.torchErr)
	}
	if s.random {
		t.Note("The %s config runs random weights (models.NewParams): latency does not depend on their values.", s.name)
	}
}

// ratio is a/b.
func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// sums are the p50s of every layer shape at M, summed: ours f32, our
// faster int8 kernel per shape, PyTorch's int8 (0 when absent).
func (s *latencySet) sums(M int) (f32, int8, torch time.Duration) {
	for _, l := range s.layers {
		if l.M != M {
			continue
		}
		_, b := l.best()
		f32 += l.ours[pathF32].p50
		int8 += b.p50
		if l.torch != nil {
			torch += l.torch[1].p50
		}
	}
	return f32, int8, torch
}

func (ql *quantizeLab) metricsAndChecks(r *reports.Report, q *qualityResult, mem []memRow, lat []*latencySet) {
	f, c := ql.f32.Bytes(), ql.q[precision.Int8PerChannel].Bytes()
	r.Metric("linear_weight_bytes_f32", f.Linear)
	r.Metric("linear_weight_bytes_int8", c.Linear)
	r.Metric("weight_bytes_f32", f.Total())
	r.Metric("weight_bytes_int8", c.Total())
	row := func(scheme string, k models.Int8Kernel) qualityRow {
		for _, x := range q.rows {
			if x.name == scheme && x.kernel == k {
				return x
			}
		}
		panic("quantize: no quality row " + scheme)
	}
	main := row("channel", models.Int8Dynamic)
	r.Metric("val_ppl_f32", q.pplF32)
	r.Metric("val_ppl_int8", main.ppl)
	r.Metric("mean_kld", main.kl)
	r.Metric("top1_agreement", main.top1)
	r.Metric("greedy_agreement", main.greedy)
	for _, s := range lat {
		suffix := ""
		if s.name == "large" {
			suffix = "_large"
		}
		for _, M := range []int{1, 64} {
			f32, i8, _ := s.sums(M)
			r.Metric(fmt.Sprintf("m%d_latency_ratio_int8_vs_f32%s", M, suffix), ratio(i8, f32))
		}
	}
	small := lat[0]
	if small.torchErr == nil {
		for _, M := range []int{1, 64} {
			_, i8, pt := small.sums(M)
			r.Metric(fmt.Sprintf("m%d_latency_ratio_int8_vs_torch_int8", M), ratio(i8, pt))
		}
		_, b := bestOf(small.forward)
		r.Metric("forward_latency_ratio_int8_vs_torch_int8", ratio(b.p50, small.torchFwd[1].p50))
	}

	// Quality targets, per channel.
	sizeRatio := float64(f.Linear) / float64(c.Linear)
	r.Check("linear weights at least 3.85x smaller (per channel, scales included)", sizeRatio >= minSizeRatio, "%.3fx: %d → %d bytes", sizeRatio, f.Linear, c.Linear)
	for _, k := range kernels {
		x := row("channel", k)
		d := x.ppl/q.pplF32 - 1
		r.Check(fmt.Sprintf("perplexity delta ≤ 0.1%% (per channel, %s)", k), math.Abs(d) <= maxPPLDelta, "%+.4f%%: %.5f against %.5f", 100*d, x.ppl, q.pplF32)
		r.Check(fmt.Sprintf("mean KL ≤ 2e-3 (per channel, %s)", k), x.kl <= maxKL, "%.3g", x.kl)
		r.Check(fmt.Sprintf("top-1 agreement ≥ 98%% (per channel, %s)", k), x.top1 >= minTop1, "%.2f%%", 100*x.top1)
	}
	ch, te, bl := mean(q.sqnr[precision.Int8PerChannel]), mean(q.sqnr[precision.Int8PerTensor]), mean(q.sqnr[precision.Int8PerBlock32])
	klC, klT, klB := row("channel", models.Int8WeightOnly).kl, row("tensor", models.Int8WeightOnly).kl, row("block32", models.Int8WeightOnly).kl
	r.Check("per-tensor visibly worse than per-channel", ch-te >= minSQNRGap && klT > klC,
		"mean SQNR %.1f against %.1f dB (want ≥ %d dB lower); KL %.3g against %.3g (weight-only)", te, ch, minSQNRGap, klT, klC)
	worse := 0
	for i := range q.names {
		if q.sqnr[precision.Int8PerBlock32][i] < q.sqnr[precision.Int8PerChannel][i] {
			worse++
		}
	}
	r.Check("block32 at least as good as per-channel", worse == 0 && klB <= klC,
		"SQNR below per-channel's on %d of %d matrices (mean %.1f against %.1f dB); KL %.3g against %.3g (weight-only)", worse, len(q.names), bl, ch, klB, klC)
	o := q.outlier
	r.Check("an outlier costs its channel, and block32 contains it", o.without[precision.Int8PerChannel]-o.with[precision.Int8PerChannel] > 10 &&
		o.without[precision.Int8PerBlock32]-o.with[precision.Int8PerBlock32] < o.without[precision.Int8PerChannel]-o.with[precision.Int8PerChannel],
		"per channel %.1f → %.1f dB, block32 %.1f → %.1f dB", o.without[precision.Int8PerChannel], o.with[precision.Int8PerChannel], o.without[precision.Int8PerBlock32], o.with[precision.Int8PerBlock32])

	// Kernels against the float32 reference.
	worstWO, worstDyn := 0.0, 0.0
	for _, s := range lat {
		for _, l := range s.layers {
			worstWO, worstDyn = max(worstWO, l.errs[pathWeightOnly]), max(worstDyn, l.errs[pathDynamic])
		}
	}
	r.Check("int8 kernels match float32 on the dequantized weights", worstWO <= tolWeightOnly && worstDyn <= tolDynamic,
		"every layer shape and M, normwise: weight-only %.2g (≤ %g), dynamic %.2g (≤ %g)", worstWO, tolWeightOnly, worstDyn, tolDynamic)
	goldWO, goldDyn := 0.0, 0.0
	for _, x := range q.rows {
		if x.kernel == models.Int8WeightOnly {
			goldWO = max(goldWO, x.golden)
		} else {
			goldDyn = max(goldDyn, x.golden)
		}
	}
	r.Check("int8 model's logits match the dequantized float32 model's", goldWO <= tolWeightOnly && goldDyn <= tolDynamic,
		"weight-only max |Δ| %.2g (≤ %g), dynamic normwise %.2g (≤ %g), every scheme", goldWO, tolWeightOnly, goldDyn, tolDynamic)

	// Memory.
	fm, im := mem[0], mem[1]
	r.Check("no float32 copy of a quantized matrix", im.inputs[arena.F32] == im.f32Part+im.scales && im.inputs[arena.Int8] == im.codes,
		"int8 program's inputs: %d float32 bytes = float32 part %d + scales %d; %d int8 bytes = %d codes", im.inputs[arena.F32], im.f32Part, im.scales, im.inputs[arena.Int8], im.codes)
	// A second copy of the codes would add im.codes to the heap after the load.
	r.Check("the int8 codes are held once", im.loaded <= im.held+im.codes/4,
		"loaded %s (heap) against %s held (codes %s): a second copy of the codes would exceed it by %s",
		reports.FormatBytes(float64(im.loaded)), reports.FormatBytes(float64(im.held)), reports.FormatBytes(float64(im.codes)),
		reports.FormatBytes(float64(im.loaded+im.codes-im.held-im.codes/4)))
	saved := fm.weights.Linear - im.weights.Linear
	r.Check("int8 evaluation holds less: planned, and resident by half the weights saved", im.planned() < fm.planned() && fm.resident-im.resident >= saved/2,
		"resident %s against %s (linear weights %s smaller; a float32 copy would cancel it); planned %s against %s",
		reports.FormatBytes(float64(im.resident)), reports.FormatBytes(float64(fm.resident)), reports.FormatBytes(float64(saved)),
		reports.FormatBytes(float64(im.planned())), reports.FormatBytes(float64(fm.planned())))

	latencyChecks(r, lat)
	r.Note("The int8 model runs in the same graphs and arena as the float32 one (models.WithInt8): the quantized matrices are int8 inputs of one byte an element, multiplied by ops.Int8Linear on internal/qgemm; gpt eval and gpt sample use the dynamic kernel. Timings are one run's on a machine shared with other work (2 cores): ratios of the same run, not absolute speeds.")
}

// latencyChecks judges the latency targets, each by the sign test over
// rounds (lab.RatioTarget): round i is run i of every timing the target
// compares. Against PyTorch, whose peer reports only its p50, a round is
// our run over PyTorch's p50; over every layer shape, each shape is
// decided on its own and the worst verdict stands; layers summed, run i
// of each layer added up.
func latencyChecks(r *reports.Report, lat []*latencySet) {
	vnni := strings.Contains(qgemm.Path(), "vnni")
	at := func(target float64) lab.RatioTarget { return lab.RatioTarget{Target: target} }
	for _, s := range lat {
		if s.torchErr != nil {
			continue
		}
		slower := []string{}
		for _, l := range s.layers {
			_, b := l.best()
			if b.p50 > l.torch[1].p50 {
				slower = append(slower, fmt.Sprintf("%s M=%d %.2fx", l.layer, l.M, ratio(b.p50, l.torch[1].p50)))
			}
		}
		detail := fmt.Sprintf("p50 slower on %d of %d shapes", len(slower), len(s.layers))
		if len(slower) > 0 {
			detail += ": " + strings.Join(slower, ", ")
		}
		// Every shape is decided on its own rounds; the check takes the
		// worst verdict (a failure, else an inconclusive shape, else the
		// highest median), naming its shape. (The worst shape's ratio in
		// each round would be the largest of 8 noisy ratios: biased up.)
		var worst reports.Timing
		worstName := ""
		rank := map[reports.Verdict]int{reports.Pass: 0, reports.Inconclusive: 1, reports.Fail: 2}
		for _, l := range s.layers {
			_, b := l.best()
			tm := at(1).Decide(rounds(s.runs, func(i int) float64 { return ratio(b.runs[i], l.torch[1].p50) }))
			if d := rank[tm.Verdict()] - rank[worst.Verdict()]; worstName == "" || d > 0 || d == 0 && tm.Median > worst.Median {
				worst, worstName = tm, fmt.Sprintf("%s M=%d", l.layer, l.M)
			}
		}
		r.TimedCheck(fmt.Sprintf("our int8 at most PyTorch's on every layer shape (%s)", s.name), worst, "%s; each shape decided on its rounds, the worst %s", detail, worstName)
		_, fb := bestOf(s.forward)
		fwd := rounds(len(fb.runs), func(i int) float64 { return ratio(fb.runs[i], s.torchFwd[1].p50) })
		r.TimedCheck(fmt.Sprintf("our int8 forward at most PyTorch's (%s)", s.name), at(1).Decide(fwd),
			"p50 %.2fx: %v against %v", ratio(fb.p50, s.torchFwd[1].p50), fb.p50.Round(time.Microsecond), s.torchFwd[1].p50.Round(time.Microsecond))
	}
	for _, s := range lat {
		f1, i1, _ := s.sums(1)
		if s.name == "large" {
			r.TimedCheck("our int8 at M=1 at most 0.5x our f32 (large)", at(0.5).Decide(s.summed(1)), "p50 %.2fx (layers summed)", ratio(i1, f1))
			f64, i64, _ := s.sums(64)
			if vnni {
				r.TimedCheck("our int8 at M=64 at most 0.5x our f32 (large, VNNI)", at(0.5).Decide(s.summed(64)), "p50 %.2fx (layers summed)", ratio(i64, f64))
			}
			continue
		}
		r.TimedCheck(fmt.Sprintf("our int8 at M=1 no slower than our f32 (%s)", s.name), at(1).Decide(s.summed(1)), "p50 %.2fx (layers summed)", ratio(i1, f1))
	}
}

// rounds is f of every round i < n.
func rounds(n int, f func(i int) float64) []float64 {
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = f(i)
	}
	return xs
}

// summed is, round by round, our best int8 kernel's time over our f32's,
// each the sum of that run over every layer at M.
func (s *latencySet) summed(M int) []float64 {
	return rounds(s.runs, func(i int) float64 {
		var f32, int8 time.Duration
		for _, l := range s.layers {
			if l.M == M {
				_, b := l.best()
				f32 += l.ours[pathF32].runs[i]
				int8 += b.runs[i]
			}
		}
		return ratio(int8, f32)
	})
}
