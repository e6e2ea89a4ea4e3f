package precision

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/internal/bf16gemm"
	"gptlab/internal/sgemm"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// precisionReport builds the lab's report from the four runs (f32 first)
// and the GEMM rates.
func precisionReport(cfg *precisionConfig, tc models.TrainConfig, runs []*policyRun, gemm gemmRates) (*reports.Report, error) {
	mc := tc.Model
	r := reports.New("precision", fmt.Sprintf("Mixed precision: %s (%d layers × %d wide, B=%d, T=%d) under four policies, same seed and batches",
		cfg.Config, mc.Layers, mc.Embd, mc.Batch, mc.Block))
	f32, bf16, fp16, raw := runs[0], runs[1], runs[2], runs[3]
	key := map[string]string{"f32": "f32", "bf16": "bf16", "fp16": "fp16_scaled", "fp16-noscale": "fp16_noscale"}

	pol := r.AddTable("The policies: where each kind of tensor is kept", reports.Text("policy"), reports.Text("activations"),
		reports.Text("weights as read"), reports.Text("gradients"), reports.Text("accumulate"), reports.Text("master, AdamW"),
		reports.Text("loss scaling"), reports.Text("linear GEMMs"))
	for _, run := range runs {
		p := run.policy
		scaling := "none"
		if p.LossScaling {
			scaling = "dynamic"
		}
		pol.Row(p.Name, p.Activations.String(), p.Weights.String(), p.Gradients.String(), p.Accumulate.String(),
			p.Master.String(), scaling, models.GEMMPath(p))
	}

	train := r.AddTable(fmt.Sprintf("Training: %d steps of each policy, interleaved", tc.Iters), reports.Text("policy"),
		reports.Float("val loss", 4), reports.Percent("vs f32", 3), reports.Int("skipped"), reports.Float("final scale", 0),
		reports.Percent("grads flushed", 3), reports.Float("step (ms)", 2), reports.Ratio("step / f32"))
	for _, run := range runs {
		var flushed any = reports.Missing // f32 has no casts
		if run.policy.Mixed() {
			flushed = run.under.Share()
		}
		ms := durationMS(run.medianStep())
		train.Row(run.name(), run.val, run.val/f32.val-1, len(run.skipped), run.scale, flushed, ms,
			ms/durationMS(f32.medianStep()))
		k := key[run.name()]
		r.Metric("val_loss_"+k, run.val)
		r.Metric("step_ms_"+k, ms)
		r.Metric("saved_activation_bytes_"+k, run.mem.Saved)
		r.Metric("step_peak_bytes_"+k, run.mem.Peak)
		r.Metric("weight_bytes_"+k, run.mem.Master+run.mem.WeightCopies)
		if run.policy.Mixed() {
			r.Metric("grad_flush_"+k+"_ratio", run.under.Share())
		}
	}
	r.Metric("skipped_steps_fp16_scaled", len(fp16.skipped))
	if len(fp16.skipped) == 0 {
		train.Note("fp16's loss scale stayed at %g: no step's scaled gradients overflowed, and the scale grows only "+
			"after %d finite steps in a row (GradScaler's growth interval), more than this run's %d.",
			fp16.scale, precision.DefaultScalerConfig().GrowthInterval, tc.Iters)
	}
	train.Note("Validation loss after the last step (mean over %d fixed batches, evaluated under the policy); "+
		"skipped: steps whose gradients held an Inf or NaN, so no update was applied; grads flushed: of the nonzero "+
		"gradient values the backward cast to 16 bits (counted in the graph at every cast, every %d steps), the share "+
		"the cast made zero; step: median wall time of a training step (forward, backward, AdamW), conversions included, "+
		"run as bench train runs it: the batch's two halves on two streams where the batch is even.",
		tc.EvalBatches, cfg.UnderflowEvery)

	mem := r.AddTable("One training step as the arena plans it on one stream", reports.Text("policy"), reports.Bytes("saved activations"),
		reports.Ratio("vs f32"), reports.Bytes("as run"), reports.Bytes("weight copies"), reports.Bytes("weights in all"),
		reports.Bytes("step peak"), reports.Ratio("peak / f32"))
	for _, run := range runs {
		m := run.mem
		mem.Row(run.name(), m.Saved, lab.Ratio(m.Saved, f32.mem.Saved), m.SavedRun, m.WeightCopies, m.Master+m.WeightCopies,
			m.Peak, lab.Ratio(m.Peak, f32.mem.Peak))
	}
	mem.Note("Saved activations: the values live as the backward starts that a backward op reads (the 16-bit copies; "+
		"under a 16-bit policy the one float32 value among them is the cast up the first backward op reads, the "+
		"logits'); as run: the same values' typed buffers in the arena the step runs from. Weights in all: the float32 "+
		"master (%s) plus the 16-bit copies the matrix products read, planned in the arena: more than float32 alone. "+
		"AdamW's two float32 moments (%s) are the same under every policy. Step peak: the whole planned arena. The "+
		"halved step the timing runs plans each stream's buffers apart, a larger arena under every policy.",
		reports.FormatBytes(float64(f32.mem.Master)), reports.FormatBytes(float64(2*f32.mem.Master)))
	r.Metric("saved_activation_ratio", lab.Ratio(bf16.mem.Saved, f32.mem.Saved))
	r.Metric("step_peak_ratio", lab.Ratio(bf16.mem.Peak, f32.mem.Peak))

	addGEMMTable(r, gemm)
	addCalibrationTable(r, gemm)
	addCausalTable(r, gemm)
	precisionChecks(r, runs, gemm)

	r.Note("In the graph, not simulated: every forward op's output is cast down to the storage format where it is " +
		"produced and cast up where read; the matrix products read their weights rounded from the float32 master; " +
		"the backward reads the 16-bit copies; each gradient is rounded at every op boundary. Every op computes in " +
		"float32 (the softmax's exponentials and sums, LayerNorm's statistics, the loss's log-sum-exp and every GEMM's " +
		"accumulation among them); see models.WithPrecision.")
	speedNote(r, f32, bf16, gemm)
	effect := "barely moves the loss at this size"
	if d := math.Abs(raw.val/f32.val - 1); d > 0.01 {
		effect = fmt.Sprintf("costs %.2f%% of the loss", 100*d)
	}
	r.Note("fp16 without scaling: %.3f%% of its nonzero gradient values flush to zero at the casts (%.4f%% with "+
		"scaling), which %s (val loss %.4f against f32's %.4f).", 100*raw.under.Share(), 100*fp16.under.Share(),
		effect, raw.val, f32.val)

	lp, err := precisionLossPlot(runs)
	if err != nil {
		return nil, err
	}
	r.AddPanels("loss", lp, 2, 24*vg.Centimeter, 16*vg.Centimeter)
	dp, err := lossDeltaPlot(runs)
	if err != nil {
		return nil, err
	}
	r.AddFigure("loss_vs_f32", dp, 16*vg.Centimeter, 8*vg.Centimeter)
	sp, err := scalePlot(fp16)
	if err != nil {
		return nil, err
	}
	r.AddFigure("loss_scale", sp, 16*vg.Centimeter, 8*vg.Centimeter)
	return r, nil
}

// precisionChecks are the lab's targets, each a comparison that can fail.
func precisionChecks(r *reports.Report, runs []*policyRun, gemm gemmRates) {
	f32, bf16, fp16, raw := runs[0], runs[1], runs[2], runs[3]
	for _, run := range []*policyRun{bf16, fp16} {
		d := run.val/f32.val - 1
		r.Check(run.name()+" reaches f32's val loss within 1%", math.Abs(d) <= 0.01,
			"%.4f against f32's %.4f: %+.3f%%", run.val, f32.val, 100*d)
	}
	r.Check("fp16 without scaling shows its underflow", raw.under.Flushed > 0 && raw.under.Share() > 2*fp16.under.Share(),
		"%d of %d nonzero gradient values flushed to zero (%.3f%%); with scaling %.4f%%: want some, and over twice the scaled share",
		raw.under.Flushed, raw.under.Nonzero, 100*raw.under.Share(), 100*fp16.under.Share())
	after := len(fp16.scales) - 20
	late := fp16.skippedAfter(20)
	r.Check("fp16 loss scaling skips under 0.1% of steps after the first 20", float64(late) < 0.001*float64(after),
		"%d steps after the 20th, %d skipped (%d in all, final scale %g)", after, late, len(fp16.skipped), fp16.scale)
	for _, run := range []*policyRun{bf16, fp16} {
		r.Check(run.name()+": saved activations at most 0.55x f32's, planned",
			lab.Ratio(run.mem.Saved, f32.mem.Saved) <= 0.55, "%d bytes against %d: %.3fx",
			run.mem.Saved, f32.mem.Saved, lab.Ratio(run.mem.Saved, f32.mem.Saved))
	}
	r.Check("bf16: saved activations at most 0.55x f32's, as run", lab.Ratio(bf16.mem.SavedRun, f32.mem.SavedRun) <= 0.55 && bf16.guarded == nil,
		"typed buffers %d bytes (%d of them 16-bit) against %d: %.3fx; guarded run of the step: %v",
		bf16.mem.SavedRun, bf16.mem.Saved16, f32.mem.SavedRun, lab.Ratio(bf16.mem.SavedRun, f32.mem.SavedRun), errOrOK(bf16.guarded))
	for _, run := range []*policyRun{f32, fp16, raw} {
		if run.guarded != nil {
			r.Check(run.name()+": guarded run of the step", false, "%v", run.guarded)
		}
	}
	if gemm.largest("amx") > 0 { // the GEMM rates measured AMX: its kernel passed its checks here
		amxCheck(r, gemm)
	}
	if !gemm.hardware() {
		return // the report says why (speedNote), with the measured rates
	}
	// Decided over the steps (lab.RatioTarget): bf16's step time over f32's
	// at the same step of training, interleaved, so both see the same load.
	// A speed target of the kernels' work, reported beside the checks, not
	// one of them: the lab's optimization is the 16-bit memory, which the
	// checks above hold; how fast the products run is the kernels' to meet.
	var steps []float64
	for i := range min(len(bf16.stepTimes), len(f32.stepTimes)) {
		steps = append(steps, float64(bf16.stepTimes[i])/float64(f32.stepTimes[i]))
	}
	tm := lab.RatioTarget{Target: 1 / stepSpeedup}.Decide(steps)
	word := lab.TargetWord(tm.Verdict())
	r.Note("Speed target, bf16 training step at least %.1fx faster than f32's: %s. Step i's time over f32's step i "+
		"(%s on VDPBF16PS/AMX): median %.3fx, 95%% interval %.3fx to %.3fx over %d steps (target at most %.3fx); "+
		"%.2f ms against %.2f ms (medians).", stepSpeedup, word, gemm.hardwareShare(), tm.Median, tm.Low, tm.High, tm.Rounds,
		1/stepSpeedup, durationMS(bf16.medianStep()), durationMS(f32.medianStep()))
}

// stepSpeedup is the bf16 step's target speed-up over f32's where a bf16
// hardware path beats float32 FMA on some of the step's products.
const stepSpeedup = 1.3

// speedNote says what the bf16 step's products ran on and what that did
// to its time: the speed-up where a hardware path beat float32 on some
// shapes, or why there is none, with the measured rates.
func speedNote(r *reports.Report, f32, bf16 *policyRun, g gemmRates) {
	ratio := durationMS(f32.medianStep()) / durationMS(bf16.medianStep())
	r.Metric("step_speedup_bf16_ratio", ratio)
	step := fmt.Sprintf("the bf16 step, its conversions included, takes %.2f ms against f32's %.2f ms (%.2fx f32's speed)",
		durationMS(bf16.medianStep()), durationMS(f32.medianStep()), ratio)
	_, amxWhy := bf16gemm.AMXStatus()
	if amxWhy != "" {
		amxWhy = " AMX: " + amxWhy + "."
	}
	switch {
	case !strings.HasPrefix(g.linear, "bf16gemm/"):
		r.Note("No bf16 hardware path on this machine, so bf16's linear layers multiply their rounded operands, "+
			"cast up to float32, with internal/sgemm; %s. The memory optimization (16-bit saved activations) is the one "+
			"this machine shows.%s", step, amxWhy)
	case !g.hardware():
		r.Note("Neither VDPBF16PS nor AMX beats float32 FMA here on the bf16 step's products; calibration timed %s, "+
			"so every product runs on widen (internal/sgemm on the operands cast up); %s. The memory optimization "+
			"(16-bit saved activations) is the one this machine shows.%s", g.bestRates(), step, amxWhy)
	default:
		r.Note("bf16's linear layers multiply on internal/bf16gemm (%s): %s on VDPBF16PS/AMX, where calibration "+
			"timed them faster than float32 FMA (%s); %s, against the %.1fx target.%s",
			g.linear, g.hardwareShare(), g.bestRates(), step, stepSpeedup, amxWhy)
	}
}

func errOrOK(err error) string {
	if err == nil {
		return "no value overwritten while live"
	}
	return err.Error()
}

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// gemmShape is one product of the training step.
type gemmShape struct {
	what    string
	m, n, k int
	aT, bT  bool
}

// largeMACs is the multiply-adds from which a product is one of the GPT's
// large shapes, where the AMX target applies: baby's largest products
// have 2^25.6 (768×512×128), tiny's 2^20.
const largeMACs = 1 << 25

// large reports whether s is one of the GPT's large shapes.
func (s gemmShape) large() bool { return s.m*s.n*s.k >= largeMACs }

// gptGEMMs are the linear layers' products of a step of mc: forward (x·Wᵀ),
// input gradient (dy·W) and weight gradient (dyᵀ·x).
func gptGEMMs(mc models.Config) []gemmShape {
	N, C := mc.Batch*mc.Block, mc.Embd
	return []gemmShape{
		{"q, k, v, attn proj", N, C, C, false, true},
		{"mlp c_fc", N, 4 * C, C, false, true},
		{"mlp c_proj", N, C, 4 * C, false, true},
		{"head (tied wte)", N, mc.Vocab, C, false, true},
		{"dx of c_fc", N, C, 4 * C, false, false},
		{"dW of c_fc", 4 * C, C, N, true, false},
		{"dW of q, k, v", C, C, N, true, false},
	}
}

// gemmRates are measured GFLOP/s: per shape, float32 sgemm's and each
// bf16gemm path's; and how the bf16 step's linear layers multiplied.
type gemmRates struct {
	paths  []string
	shapes []gemmShape
	f32    []float64
	bf16   [][]float64 // [shape][path]
	runs   int
	// linear is models.GEMMPath of the bf16 policy; mode bf16gemm's
	// (auto or a forced path); choices the calibrations of the step's
	// products, empty where a path was forced or none ran.
	linear, mode string
	choices      []bf16gemm.Choice
	causal       []bf16gemm.CausalChoice // the attention's causal products
}

// stepGEMMs records how the bf16 step's products ran (call after
// training, before measureGEMMs forces paths).
func stepGEMMs(g *gemmRates, bf16 precision.Policy) {
	g.linear, g.mode = models.GEMMPath(bf16), bf16gemm.Mode()
	g.choices, g.causal = bf16gemm.Choices(), bf16gemm.CausalChoices()
}

// hardware reports whether some product of the bf16 step ran on
// VDPBF16PS or AMX.
func (g gemmRates) hardware() bool {
	if !strings.HasPrefix(g.linear, "bf16gemm/") {
		return false // sgemm, or nothing recorded
	}
	if g.mode != "auto" {
		return g.mode != "widen"
	}
	for _, c := range g.choices {
		if c.Path != "widen" {
			return true
		}
	}
	return false
}

// hardwareShare says how many of the bf16 step's product shapes ran on a
// hardware path: "5 of 12 product shapes", or "every product" when forced.
func (g gemmRates) hardwareShare() string {
	if g.mode != "auto" {
		return "every product (" + g.mode + ", forced)"
	}
	n := 0
	for _, c := range g.choices {
		if c.Path != "widen" {
			n++
		}
	}
	return fmt.Sprintf("%d of %d product shapes", n, len(g.choices))
}

// bestRates is each path's best calibrated rate over the step's shapes,
// "widen 201 GFLOP/s, avx512bf16 285 GFLOP/s at best over 12 shapes",
// or a sentence saying no shape was calibrated.
func (g gemmRates) bestRates() string {
	if len(g.choices) == 0 {
		return "no shape (a path was forced: " + g.mode + ")"
	}
	best := make([]float64, len(g.choices[0].Paths))
	for _, c := range g.choices {
		for i := range c.Paths {
			best[i] = max(best[i], c.Rate(i))
		}
	}
	var parts []string
	for i, p := range g.choices[0].Paths {
		parts = append(parts, fmt.Sprintf("%s %.0f GFLOP/s", p, best[i]))
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" at best over %d shapes", len(g.choices))
}

// addCalibrationTable lists the calibration of each product shape of the
// bf16 step: each path's rate and the one chosen.
func addCalibrationTable(r *reports.Report, g gemmRates) {
	r.Metric("gemm_calibrated_shapes", len(g.choices))
	if len(g.choices) == 0 {
		r.Metric("gemm_hardware_shapes", 0)
		return
	}
	cols := []reports.Column{reports.Text("form"), reports.Text("m×n×k"), reports.Int("threads")}
	for _, p := range g.choices[0].Paths {
		cols = append(cols, reports.Float(p, 1))
	}
	cols = append(cols, reports.Text("chosen"), reports.Ratio("chosen / widen"))
	t := r.AddTable("Calibration: the path of each product shape of the bf16 step, GFLOP/s", cols...)
	hw, rounds := 0, g.choices[0].Rounds
	for _, c := range g.choices {
		rounds = min(rounds, c.Rounds)
		row := []any{c.Form(), fmt.Sprintf("%d×%d×%d", c.M, c.N, c.K), c.Threads}
		chosen := 0
		for i := range c.Paths {
			row = append(row, c.Rate(i))
			if c.Paths[i] == c.Path {
				chosen = i
			}
		}
		if chosen != 0 {
			hw++
		}
		t.Row(append(row, c.Path, c.Rate(chosen)/c.Rate(0))...)
	}
	r.Metric("gemm_hardware_shapes", hw)
	t.Note("Timed by bf16gemm on first use of each shape (the best of at least %d interleaved calls of each path, on "+
		"bf16 operands, as the step's products mostly read them), once for the process; a hardware path is chosen "+
		"where it beats widen (the operands widened to float32 and multiplied by internal/sgemm) by more than 3%%. "+
		"A product whose operand the step holds as float32 (its cast up has a reader that needs it) converts it on a "+
		"hardware path. GPTLAB_BF16=widen|avx512bf16|amx forces one.", rounds)
}

// addCausalTable lists the calibration of the bf16 step's attention
// products, where any ran calibrated.
func addCausalTable(r *reports.Report, g gemmRates) {
	if len(g.causal) == 0 {
		return
	}
	t := r.AddTable("Calibration: the attention's causal products of the bf16 step, GFLOP/s",
		reports.Text("product"), reports.Text("item T×T×d"), reports.Float("widen", 1), reports.Float("avx512bf16", 1),
		reports.Text("chosen"), reports.Ratio("chosen / widen"))
	for _, c := range g.causal {
		chosen := c.Rate(0)
		if c.Path != c.Paths[0] {
			chosen = c.Rate(1)
		}
		t.Row(c.Kind.String(), fmt.Sprintf("%d×%d×%d", c.T, c.T, c.D), c.Rate(0), c.Rate(1), c.Path, chosen/c.Rate(0))
	}
	t.Note("One item (one head of one sequence) of each product, timed as the products above on first use: the " +
		"scores on and below the diagonal (A·Bᵀ lower), and the products with the probabilities or their gradient, " +
		"lower triangular, as L·B and Lᵀ·B. Rates count the triangle's multiply-adds, T(T+1)/2·d of them.")
}

// largestShape is the index of the shape of most work.
func (g gemmRates) largestShape() int {
	best, at := 0, 0
	for i, s := range g.shapes {
		if w := s.m * s.n * s.k; w > best {
			best, at = w, i
		}
	}
	return at
}

// largest is path's rate over f32's on the shape of most work (0 for a
// path this machine does not have).
func (g gemmRates) largest(path string) float64 {
	if len(g.shapes) == 0 || len(g.f32) == 0 {
		return 0 // no rates measured
	}
	at := g.largestShape()
	for j, p := range g.paths {
		if p == path {
			return g.bf16[at][j] / g.f32[at]
		}
	}
	return 0
}

// largestRound returns a round of a timed check: one product of the
// largest shape in float32, then on path, and the second's time over the
// first's.
func (g gemmRates) largestRound(path string) func() (float64, error) {
	p := newGEMMProblem(g.shapes[g.largestShape()], rand.New(rand.NewPCG(11, 12)))
	return func() (float64, error) {
		t0 := time.Now()
		p.f32()
		t1 := time.Now()
		defer func(old string) { _ = bf16gemm.SetPath(old) }(bf16gemm.Mode())
		if err := bf16gemm.SetPath(path); err != nil {
			return 0, err
		}
		t2 := time.Now()
		p.bf16()
		return float64(time.Since(t2)) / float64(t1.Sub(t0)), nil
	}
}

// gemmProblem is one shape's operands, bf16 and the same values widened.
type gemmProblem struct {
	s        gemmShape
	a16, b16 []uint16
	a32, b32 []float32
	c        []float32
	lda, ldb int
	tA, tB   blas.Transpose
}

func newGEMMProblem(s gemmShape, rng *rand.Rand) *gemmProblem {
	p := &gemmProblem{s: s, c: make([]float32, s.m*s.n), lda: s.k, ldb: s.n, tA: transpose(s.aT), tB: transpose(s.bT)}
	p.a16, p.a32 = bf16Operand(rng, s.m*s.k)
	p.b16, p.b32 = bf16Operand(rng, s.k*s.n)
	if s.aT {
		p.lda = s.m
	}
	if s.bT {
		p.ldb = s.k
	}
	return p
}

func (p *gemmProblem) f32() {
	s := p.s
	sgemm.Implementation{}.Sgemm(p.tA, p.tB, s.m, s.n, s.k, 1, p.a32, p.lda, p.b32, p.ldb, 0, p.c, s.n)
}

func (p *gemmProblem) bf16() {
	s := p.s
	bf16gemm.Gemm(p.tA, p.tB, s.m, s.n, s.k, p.a16, p.lda, p.b16, p.ldb, p.c, s.n)
}

// measureGEMMs times every shape of mc's step in float32 and on every
// bf16gemm path this machine has, on the same random values (bf16, and
// the same values widened), each the best of runs runs.
func measureGEMMs(mc models.Config, runs int) gemmRates {
	defer func(p string) { _ = bf16gemm.SetPath(p) }(bf16gemm.Mode())
	g := gemmRates{paths: bf16gemm.Paths(), shapes: gptGEMMs(mc), runs: runs}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range g.shapes {
		prob := newGEMMProblem(s, rng)
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		g.f32 = append(g.f32, bestRate(flops, runs, prob.f32))
		var row []float64
		for _, p := range g.paths {
			_ = bf16gemm.SetPath(p) // a path Paths lists
			row = append(row, bestRate(flops, runs, prob.bf16))
		}
		g.bf16 = append(g.bf16, row)
	}
	return g
}

func transpose(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// bf16Operand is n normal values rounded to bf16, and the same widened.
func bf16Operand(rng *rand.Rand, n int) ([]uint16, []float32) {
	b, f := make([]uint16, n), make([]float32, n)
	for i := range b {
		b[i] = precision.ToBF16(float32(rng.NormFloat64()))
	}
	precision.DecodeBF16(f, b)
	return b, f
}

// bestRate is flops / the best time per call of f over runs runs, each of
// enough calls to take about 2 ms (after one warm call).
func bestRate(flops float64, runs int, f func()) float64 {
	f()
	calls := 1
	for t0 := time.Now(); time.Since(t0) < 2*time.Millisecond; calls++ {
		f()
	}
	best := math.Inf(1)
	for range runs {
		t0 := time.Now()
		for range calls {
			f()
		}
		best = min(best, time.Since(t0).Seconds()/float64(calls))
	}
	return flops / best / 1e9
}

// addGEMMTable reports the GEMM rates.
func addGEMMTable(r *reports.Report, g gemmRates) {
	cols := []reports.Column{reports.Text("product"), reports.Text("m×n×k"), reports.Float("f32 sgemm", 1)}
	for _, p := range g.paths {
		cols = append(cols, reports.Float("bf16 "+p, 1))
	}
	cols = append(cols, reports.Ratio("best bf16 / f32"))
	t := r.AddTable(fmt.Sprintf("GEMM rates on the step's linear-layer shapes, GFLOP/s (best of %d runs)", g.runs), cols...)
	for i, s := range g.shapes {
		row := []any{s.what, fmt.Sprintf("%d×%d×%d", s.m, s.n, s.k), g.f32[i]}
		best := 0.0
		for _, v := range g.bf16[i] {
			row = append(row, v)
			best = max(best, v)
		}
		t.Row(append(row, best/g.f32[i])...)
	}
	t.Note("Same values in every column (bf16, and for f32 the same widened); threads: GOMAXPROCS. widen converts the " +
		"operands to float32 and runs internal/sgemm; avx512bf16 is VDPBF16PS; amx is TDPBF16PS on tiles (where present).")
	at := g.largestShape() // the metrics: the shape of most work
	r.Metric("gemm_f32_gflop_per_s", g.f32[at])
	for j, p := range g.paths {
		r.Metric("gemm_bf16_"+p+"_gflop_per_s", g.bf16[at][j])
	}
}

// policyColors tell the four policies apart in the figures.
var policyColors = []color.RGBA{{R: 40, G: 40, B: 40, A: 255}, {R: 220, G: 90, B: 30, A: 255},
	{R: 70, G: 130, B: 180, A: 255}, {R: 150, G: 60, B: 160, A: 255}}

// precisionLossPlot draws every policy's training loss (moving average)
// and validation loss, a panel each (small multiples on shared axes).
func precisionLossPlot(runs []*policyRun) ([]*plot.Plot, error) {
	var panels []*plot.Plot
	for i, run := range runs {
		p := plot.New()
		p.Title.Text = run.name() + " (same seed, same batches)"
		p.X.Label.Text = "step"
		p.Y.Label.Text = "loss (nats/char)"
		train, _ := lab.MovingAverage(run.tr.Losses)
		val := make(plotter.XYs, len(run.tr.History))
		for j, pt := range run.tr.History {
			val[j] = plotter.XY{X: float64(pt.Step), Y: pt.Val}
		}
		l, err := plotter.NewLine(train)
		if err != nil {
			return nil, err
		}
		vl, vp, err := plotter.NewLinePoints(val)
		if err != nil {
			return nil, err
		}
		l.Color, vl.Color, vp.Color = policyColors[i], policyColors[i], policyColors[i]
		l.Width = vg.Points(0.5)
		vl.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		p.Add(l, vl, vp)
		p.Legend.Add("train", l)
		p.Legend.Add("val", vl, vp)
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		p.Add(plotter.NewGrid())
		panels = append(panels, p)
	}
	return panels, nil
}

// lossDeltaPlot draws each 16-bit policy's validation loss less f32's at
// every validation (the curves of the loss figure lie on top of each
// other).
func lossDeltaPlot(runs []*policyRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Validation loss less f32's (same seed, same batches)"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "Δ val loss (nats/char)"
	base := runs[0].tr.History
	for i, run := range runs[1:] {
		xy := make(plotter.XYs, len(run.tr.History))
		for j, pt := range run.tr.History {
			xy[j] = plotter.XY{X: float64(pt.Step), Y: pt.Val - base[j].Val}
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, err
		}
		l.Color, pts.Color = policyColors[i+1], policyColors[i+1]
		p.Add(l, pts)
		p.Legend.Add(run.name(), l, pts)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p, nil
}

// scalePlot draws the fp16 run's loss scale at every step (log2) and
// marks the skipped steps.
func scalePlot(run *policyRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "fp16: dynamic loss scale (GradScaler's defaults)"
	p.X.Label.Text = "step"
	p.Y.Label.Text = "log2(loss scale)"
	xy := make(plotter.XYs, len(run.scales))
	for i, s := range run.scales {
		xy[i] = plotter.XY{X: float64(i + 1), Y: math.Log2(float64(s))}
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	l.Color = policyColors[2]
	p.Add(l)
	p.Legend.Add("scale of the step", l)
	if len(run.skipped) > 0 {
		sk := make(plotter.XYs, len(run.skipped))
		for i, s := range run.skipped {
			sk[i] = plotter.XY{X: float64(s), Y: math.Log2(float64(run.scales[s-1]))}
		}
		sc, err := plotter.NewScatter(sk)
		if err != nil {
			return nil, err
		}
		sc.Color = policyColors[1]
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("skipped (%d)", len(run.skipped)), sc)
	}
	p.Y.Min, p.Y.Max = min(p.Y.Min, 0), max(p.Y.Max, 17)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p, nil
}

// amxCheck holds AMX's bf16 GEMM to 3x f32's speed on the largest of
// gemm's shapes, decided over rounds (lab.RatioTarget: AMX's time over
// f32's, a product each a round) where that shape is one of the GPT's
// large ones, and says what it measured where it is not.
func amxCheck(r *reports.Report, gemm gemmRates) {
	big := gemm.shapes[gemm.largestShape()]
	if !big.large() {
		r.Note("AMX's bf16 GEMM on the largest shape, %dx%dx%d: %.2fx f32's rate (best of %d runs); its 3x target is "+
			"for the GPT's large shapes (%d multiply-adds and up, baby's), so it is not checked at this size.",
			big.m, big.n, big.k, gemm.largest("amx"), gemm.runs, largeMACs)
		return
	}
	tm, err := lab.RatioTarget{Target: 1.0 / 3, Budget: 10 * time.Second}.Sample(context.Background(), nil, gemm.largestRound("amx"))
	if err == nil {
		r.TimedCheck("AMX bf16 GEMM at least 3x f32's on the largest shape", tm,
			"AMX's time over f32's (best of %d runs: %.2fx the rate)", gemm.runs, gemm.largest("amx"))
	}
}
