package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"gptlab/experiments/lab"
	"gptlab/internal/sgemm"
	"gptlab/models"
	"gptlab/planner"
	"gptlab/planner/arena"
	"gptlab/precision"
	"gptlab/reports"
)

func init() {
	RegisterCommand(&Command{Name: "bench", Short: "time and memory of the GPT's work, as the reference's bench mode measures them"})
	RegisterCommand(&Command{
		Name:  "bench train",
		Usage: "[--set key=value ...] [--seed N] [--steps K] [--profile] [--format F] [--out DIR]",
		Short: "the time and memory of one training step (forward, backward, AdamW)",
		Long:  "Times K steps on one fixed random batch after the warmup steps; reports the median step, allocations per step and the peak heap.",
		Setup: benchTrainCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&benchDefaults, nil).WriteText(w, reports.Width)
		},
	})
}

// benchConfig are the settings of `gptlab bench train`.
type benchConfig struct {
	Config  string  `set:"config" help:"model preset: tiny, small or baby"`
	Batch   int     `set:"batch" help:"sequences per step; 0: the preset's"`
	Layers  int     `set:"layers" help:"transformer blocks; 0: the preset's (the checkpoint lab's deep is baby with 16)"`
	Block   int     `set:"block" help:"tokens per sequence; 0: the preset's (the checkpoint lab's long is baby with 256)"`
	Dropout float64 `set:"dropout" help:"dropout probability"`
	Warmup  int     `set:"warmup" help:"untimed steps before the timed ones"`
	Exec    string  `set:"executor" help:"arena (the planned arena, the default) or tape (gorgonia's TapeMachine)"`
	BLAS    string  `set:"blas" help:"matrix products: sgemm (default), gonum, or openblas in -tags openblas builds"`
	Prec    string  `set:"precision" help:"precision policy: f32 (default), bf16, fp16 or fp16-noscale (casts in the graph)"`
	Streams string  `set:"streams" help:"1: the ops one after another, each split across the cores; 2: on the two streams the scheduler assigns from measured costs; halves: each stream runs half the batch's sequences (an even batch); auto: halves for an even batch, else 2 where measured faster"`
}

// heapMetric is sampled for peak_heap_bytes: the bytes of live and
// not-yet-swept heap objects (what MemStats calls HeapAlloc), read without
// stopping the world.
const heapMetric = "/memory/classes/heap/objects:bytes"

// benchDefaults: the small preset on the planned arena with gptlab's GEMM.
var benchDefaults = benchConfig{Config: "small", Warmup: 2, Exec: "arena", BLAS: "sgemm", Prec: "f32", Streams: "auto"}

// maxBenchSteps bounds --steps.
const maxBenchSteps = 100_000

// maxBenchLayers and maxBenchBlock bound --set layers and block: at baby's
// batch and heads, 1024 tokens make each (B·H, T, T) attention tensor 192
// MiB, and a layer keeps several.
const (
	maxBenchLayers = 96
	maxBenchBlock  = 1024
)

// benchTrainCommand is `gptlab bench train`: the time and memory of one
// training step (forward, backward, AdamW) on a fixed random batch, like
// the reference's bench mode.
func benchTrainCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	seed := seedFlag(fs, "seed `N` of the parameters and the batch")
	steps := fs.Int("steps", 10, "timed steps `K`")
	profile := fs.Bool("profile", false, "also profile the step's ops over K runs: where its time goes, by kind of op")
	format, out := reportFlags(fs, "report.md and report.json")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("bench train", args); err != nil {
			return err
		}
		if *steps < 1 || *steps > maxBenchSteps {
			return lab.Usagef("bench train: --steps %d: want 1 to %d", *steps, maxBenchSteps)
		}
		bc := benchDefaults
		if err := lab.ApplySets(&bc, sets); err != nil {
			return err
		}
		if bc.Warmup < 0 || bc.Warmup > maxBenchSteps {
			return lab.Usagef("bench train: --set warmup=%d: want 0 to %d", bc.Warmup, maxBenchSteps)
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		r, err := benchTrain(ctx, &bc, *steps, *seed, *profile)
		if err != nil {
			return err
		}
		r.Config.Set("config", bc.Config)
		r.Config.Set("batch", bc.Batch)
		r.Config.Set("layers", bc.Layers)
		r.Config.Set("block", bc.Block)
		r.Config.Set("dropout", bc.Dropout)
		r.Config.Set("warmup", bc.Warmup)
		r.Config.Set("executor", bc.Exec)
		r.Config.Set("blas", models.BLAS())
		r.Config.Set("precision", bc.Prec)
		r.Config.Set("streams", bc.Streams)
		r.Config.Set("steps", *steps)
		r.Config.Set("seed", *seed)
		return emit(r, *format, *out, stdout)
	}
}

// benchTrain times `steps` training steps after bc.Warmup untimed ones.
// bc.Batch, Layers and Block 0 are resolved to the preset's.
func benchTrain(ctx context.Context, bc *benchConfig, steps int, seed int64, profile bool) (*reports.Report, error) {
	mc, err := models.Preset(bc.Config)
	if err != nil {
		return nil, lab.Usagef("--set config=%s: unknown preset (want %s)", bc.Config, strings.Join(models.PresetNames(), ", "))
	}
	for _, f := range []struct {
		key         string
		set         *int
		preset, max int
	}{
		{"batch", &bc.Batch, mc.Batch, lab.MaxBatch},
		{"layers", &bc.Layers, mc.Layers, maxBenchLayers},
		{"block", &bc.Block, mc.Block, maxBenchBlock},
	} {
		if *f.set < 0 || *f.set > f.max {
			return nil, lab.Usagef("--set %s=%d: want 1 to %d, or 0 for the preset's", f.key, *f.set, f.max)
		}
		if *f.set == 0 {
			*f.set = f.preset
		}
	}
	mc.Batch, mc.Layers, mc.Block = bc.Batch, bc.Layers, bc.Block
	if !(bc.Dropout >= 0 && bc.Dropout < 1) {
		return nil, lab.Usagef("--set dropout=%v: want at least 0 and below 1", bc.Dropout)
	}
	mc.Dropout = bc.Dropout
	var opts []models.ModelOption
	switch bc.Exec {
	case "arena":
	case "tape":
		opts = append(opts, models.WithTapeMachine())
	default:
		return nil, lab.Usagef("--set executor=%s: want arena or tape", bc.Exec)
	}
	if err := models.SetBLAS(bc.BLAS); err != nil {
		return nil, lab.Usagef("--set blas=%s: %v", bc.BLAS, err)
	}
	pol, err := precision.ParsePolicy(bc.Prec)
	if err != nil {
		return nil, lab.Usagef("--set precision=%s: %v", bc.Prec, err)
	}
	if pol.Mixed() {
		opts = append(opts, models.WithPrecision(pol))
	}
	streams, ok := map[string]models.Streams{"1": models.OneStream, "2": models.TwoStreams, "halves": models.HalfBatches, "auto": models.StreamsByMeasurement}[bc.Streams]
	if !ok {
		return nil, lab.Usagef("--set streams=%s: want 1, 2, halves or auto", bc.Streams)
	}
	if bc.Streams == "auto" && mc.Batch%2 == 0 {
		streams = models.HalfBatches
	}
	if bc.Streams == "halves" && mc.Batch%2 != 0 {
		return nil, lab.Usagef("--set streams=halves: a batch of %d sequences has no two halves", mc.Batch)
	}
	if streams != models.OneStream {
		switch {
		case bc.Exec == "arena":
			opts = append(opts, models.WithStreams(streams))
		case bc.Streams != "auto":
			return nil, lab.Usagef("--set streams=%s: streams run on the arena, not with --set executor=%s", bc.Streams, bc.Exec)
		}
	}
	p := models.NewParams(mc, seed)
	m, err := models.NewModel(mc, p, mc.Batch, mc.Block, true, opts...)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	opt := models.NewAdamW(p, models.DefaultAdamW())
	rng := rand.New(rand.NewPCG(uint64(seed), 0x62656e6368)) // "bench"
	n := mc.Batch * mc.Block
	idx, tgt := make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i], tgt[i] = int32(rng.IntN(mc.Vocab)), int32(rng.IntN(mc.Vocab))
	}
	step := func() (float32, error) {
		loss, err := m.Step(idx, tgt)
		if err != nil {
			return 0, err
		}
		_, err = opt.Step(m, 1e-3)
		return loss, err
	}
	stopped := func(done int) error {
		return lab.Interruptedf("interrupted after %d of %d steps; nothing saved", done, bc.Warmup+steps)
	}
	for k := range bc.Warmup {
		if ctx.Err() != nil {
			return nil, stopped(k)
		}
		if _, err := step(); err != nil {
			return nil, err
		}
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	peak, stopSampler := sampleHeapPeak(2 * time.Millisecond)
	times := make([]time.Duration, steps)
	losses := make([]float32, steps)
	for k := range steps {
		if ctx.Err() != nil {
			stopSampler()
			return nil, stopped(bc.Warmup + k)
		}
		t0 := time.Now()
		losses[k], err = step()
		times[k] = time.Since(t0)
		if err != nil {
			stopSampler()
			return nil, err
		}
	}
	stopSampler()
	runtime.ReadMemStats(&after)

	K := float64(steps)
	med := lab.MedianDuration(times)
	r := reports.New("bench-train", fmt.Sprintf("Training step of %s (B=%d, T=%d, %d layers): time and allocation", bc.Config, mc.Batch, mc.Block, mc.Layers))
	r.Metric("median_step_ms", ms(med))
	r.Metric("min_step_ms", ms(slicesMin(times)))
	r.Metric("tokens_per_s", float64(n)/med.Seconds())
	r.Metric("allocs_per_step", float64(after.Mallocs-before.Mallocs)/K)
	r.Metric("bytes_allocated_per_step", float64(after.TotalAlloc-before.TotalAlloc)/K)
	r.Metric("gc_cycles_per_step", float64(after.NumGC-before.NumGC)/K)
	r.Metric("peak_heap_bytes", *peak)
	r.Metric("parameter_count", p.Count())
	t := r.AddTable("Timed steps", reports.Int("step"), reports.Duration("time", time.Millisecond, 3), reports.Float("loss", 4))
	for k := range steps {
		t.Row(k+1, times[k], losses[k])
	}
	if steps > 1 {
		r.Check("loss falls on the fixed batch", losses[steps-1] < losses[0],
			"loss %.4f at the first timed step, %.4f at the last: the steps update the model", losses[0], losses[steps-1])
	} else {
		r.Note("One timed step: whether the loss falls on the fixed batch needs two, so it is not checked.")
	}
	r.Note("One step is forward, backward and AdamW (lr 1e-3) on one fixed random batch, as the reference's bench mode. allocs_per_step and bytes_allocated_per_step are runtime.MemStats deltas (Mallocs, TotalAlloc) over the timed steps divided by their number; peak_heap_bytes is the largest %s (HeapAlloc) sampled every 2 ms during them.", heapMetric)
	benchPeak(r, m.StepFlops(), med)
	if c, ok := m.StreamChoice(); ok {
		benchStreams(r, c, streams == models.HalfBatches, mc.Batch)
	}
	if profile {
		if bc.Exec != "arena" {
			return nil, lab.Usagef("bench train: --profile times the arena's ops: not with --set executor=%s", bc.Exec)
		}
		update := func() error { _, err := opt.Step(m, 1e-3); return err }
		if err := benchProfile(r, m, steps, update); err != nil {
			return nil, err
		}
		if err := benchTimeline(r, m, steps); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// benchStreams reports what the stream scheduler assigned and, by
// measurement, chose.
func benchStreams(r *reports.Report, c arena.StreamChoice, halves bool, B int) {
	r.Metric("streams", c.Chosen)
	r.Metric("stream_ops", c.Steps[0]+c.Steps[1])
	r.Metric("stream1_ops", c.Steps[1])
	r.Metric("stream_model_one_ms", c.Assignment.OneStream*1e3)
	r.Metric("stream_model_two_ms", c.Assignment.TwoStreams*1e3)
	r.Metric("arena_bytes_one_stream", c.ArenaOne)
	r.Metric("arena_bytes_two_streams", c.ArenaTwo)
	how := "the scheduler put"
	if halves {
		how = fmt.Sprintf("the step runs as two halves of its batch (%s each), each half's ops on a stream of its own, and the scheduler placed the ops they share: it put", reports.Count(B/2, "sequence"))
		if c.Chosen == 1 {
			how = fmt.Sprintf("the step runs as two halves of its batch (%s each), on one stream: the process has one usable CPU. The scheduler would have put", reports.Count(B/2, "sequence"))
		}
	}
	costs := "the ops' measured costs"
	if halves {
		costs = "the cost model's costs of the ops (the same on every run)"
	}
	note := fmt.Sprintf("Streams: %s %d of the step's %d ops on stream 1; from %s it expected %.1f ms on two streams against %.1f on one (the sum of each op alone). The arena: %s on one stream, %s on two.",
		how, c.Steps[1], c.Steps[0]+c.Steps[1], costs, c.Assignment.TwoStreams*1e3, c.Assignment.OneStream*1e3, planner.FormatBytes(c.ArenaOne), planner.FormatBytes(c.ArenaTwo))
	if c.One > 0 {
		r.Metric("stream_measured_one_ms", ms(c.One))
		r.Metric("stream_measured_two_ms", ms(c.Two))
		note += fmt.Sprintf(" Measured, forward and backward, interleaved: %v on one, %v on two; the step runs on %s.",
			c.One.Round(10*time.Microsecond), c.Two.Round(10*time.Microsecond), reports.Count(c.Chosen, "stream"))
	}
	r.Note("%s", note)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// sampleHeapPeak samples heapMetric every interval in a goroutine until
// stop is called; *peak then holds the largest value seen.
func sampleHeapPeak(interval time.Duration) (peak *uint64, stop func()) {
	peak = new(uint64)
	s := []metrics.Sample{{Name: heapMetric}}
	read := func() {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 {
			*peak = max(*peak, s[0].Value.Uint64())
		}
	}
	read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				read()
			}
		}
	}()
	return peak, func() {
		close(done)
		wg.Wait()
		read()
	}
}

func slicesMin(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds[1:] {
		m = min(m, d)
	}
	return m
}

// benchProfile adds where a step's time goes: the arena's ops by kind,
// each kind's median time over runs profiled runs of the forward and
// backward, against its FLOPs and bytes, and the optimizer's update
// (outside the program), timed alone as many times.
func benchProfile(r *reports.Report, m *models.Model, runs int, update func() error) error {
	kinds, err := m.OpProfile(runs)
	if err != nil {
		return err
	}
	ups := make([]time.Duration, runs)
	for i := range ups {
		t0 := time.Now()
		if err := update(); err != nil {
			return err
		}
		ups[i] = time.Since(t0)
	}
	adamw := lab.MedianDuration(ups)
	step := adamw
	var fl float64
	for _, k := range kinds {
		step += k.Time
		fl += k.Flops
	}
	t := r.AddTable(fmt.Sprintf("Where a step's time goes: its ops by kind, median of %s", reports.Count(runs, "profiled run")),
		reports.Text("op"), reports.Int("ops"), reports.Duration("time", time.Millisecond, 3), reports.Percent("share", 1),
		reports.Float("MFLOP", 1), reports.Float("GFLOP/s", 1), reports.Float("MB moved", 1), reports.Float("GB/s", 1))
	for _, k := range kinds {
		sec := k.Time.Seconds()
		t.Row(k.Kind, k.Ops, k.Time, sec/step.Seconds(), k.Flops/1e6, rate(k.Flops, sec)/1e9, k.Bytes/1e6, rate(k.Bytes, sec)/1e9)
	}
	t.Row("AdamW (outside the graph)", 1, adamw, adamw.Seconds()/step.Seconds(), math.NaN(), math.NaN(), math.NaN(), math.NaN())
	r.Metric("profiled_step_ms", ms(step))
	r.Metric("profiled_adamw_ms", ms(adamw))
	r.Metric("profiled_gflop_per_s", fl/step.Seconds()/1e9)
	t.Note("Each op is timed alone (a clock read around it), in the program's order, on the bench's batch; a kind's time is the sum of its ops' medians, its share that over the profiled step (the kinds' sum and AdamW's median: %s, beside the timed steps' median above). FLOPs count a product's multiply-adds twice and one per output element of any other op; bytes are the op's inputs and output once each (the checkpointing cost model's counts).",
		step.Round(time.Microsecond))
	return nil
}

// peakTime is how long each of Peak's two measurements runs.
const peakTime = 200 * time.Millisecond

// benchPeak adds the step's FLOP rate beside the machine's FMA peak,
// measured now on one thread and on GOMAXPROCS (sgemm.Peak), after the
// timed steps so that it does not warm or cool them.
func benchPeak(r *reports.Report, flops float64, med time.Duration) {
	procs := runtime.GOMAXPROCS(0)
	one, what := sgemm.Peak(1, peakTime)
	all := one
	if procs > 1 {
		all, _ = sgemm.Peak(procs, peakTime)
	}
	stepRate := rate(flops, med.Seconds()) / 1e9
	r.Metric("step_gflop", flops/1e9)
	r.Metric("step_gflop_per_s", stepRate)
	r.Metric("fma_peak_1t_gflop_per_s", one)
	r.Metric("fma_peak_gflop_per_s", all)
	r.Metric("step_share_of_fma_peak", stepRate/all)
	r.Note("Peak: the %s on %s at once: %.0f GFLOP/s (%.0f on one), measured for %v after the timed steps; the median step's %.3f GFLOP (its products' multiply-adds twice, one per output element of any other op; AdamW aside) at %.1f GFLOP/s is %.0f%% of it.",
		what, reports.Count(procs, "thread"), all, one, peakTime, flops/1e9, stepRate, 100*stepRate/all)
}

// rate is x per second over sec, NaN when no time was measured.
func rate(x, sec float64) float64 {
	if sec <= 0 {
		return math.NaN()
	}
	return x / sec
}
