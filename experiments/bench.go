package experiments

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"gptlab/models"
	"gptlab/reports"
)

func init() {
	commands["bench"] = runBench
}

// benchConfig are the settings of `gptlab bench train`.
type benchConfig struct {
	Config  string  `set:"config" help:"model preset: tiny, small or baby"`
	Batch   int     `set:"batch" help:"sequences per step; 0: the preset's"`
	Dropout float64 `set:"dropout" help:"dropout probability"`
	Warmup  int     `set:"warmup" help:"untimed steps before the timed ones"`
	Exec    string  `set:"executor" help:"arena (the planned arena, the default) or tape (gorgonia's TapeMachine)"`
	BLAS    string  `set:"blas" help:"matrix products: sgemm (default), gonum, or openblas in -tags openblas builds"`
}

// heapMetric is sampled for peak_heap_bytes: the bytes of live and
// not-yet-swept heap objects (what MemStats calls HeapAlloc), read without
// stopping the world.
const heapMetric = "/memory/classes/heap/objects:bytes"

// runBench is `gptlab bench train`: the time and memory of one training
// step (forward, backward, AdamW) on a fixed random batch, like the
// reference's bench mode.
func runBench(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "train" {
		return usageError("bench: want `gptlab bench train [--set config=NAME ...] [--steps K] [--format json]`")
	}
	fs := flag.NewFlagSet("bench train", flag.ContinueOnError)
	var sets setFlag
	fs.Var(&sets, "set", "config=NAME, batch=N, dropout=P, warmup=N")
	seed := fs.Int64("seed", 1, "seed of the parameters and the batch")
	steps := fs.Int("steps", 10, "timed steps")
	format, out := reportFlags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if err := checkFormat(*format); err != nil {
		return err
	}
	if *steps < 1 {
		return usageError("bench train: --steps = %d, want >= 1", *steps)
	}
	bc := benchConfig{Config: "small", Warmup: 2, Exec: "arena", BLAS: "sgemm"}
	if err := applySets(&bc, sets); err != nil {
		return err
	}
	if bc.Warmup < 0 {
		return usageError("bench train: --set warmup=%d: want >= 0", bc.Warmup)
	}
	r, err := benchTrain(&bc, *steps, *seed)
	if err != nil {
		return err
	}
	r.Config.Set("config", bc.Config)
	r.Config.Set("batch", bc.Batch)
	r.Config.Set("dropout", bc.Dropout)
	r.Config.Set("warmup", bc.Warmup)
	r.Config.Set("executor", bc.Exec)
	r.Config.Set("blas", models.BLAS())
	r.Config.Set("steps", *steps)
	r.Config.Set("seed", *seed)
	return emit(r, *format, *out, stdout)
}

// benchTrain times `steps` training steps after bc.Warmup untimed ones.
// bc.Batch 0 is resolved to the preset's batch.
func benchTrain(bc *benchConfig, steps int, seed int64) (*reports.Report, error) {
	mc, err := models.Preset(bc.Config)
	if err != nil {
		return nil, usageError("--set config=%s: unknown preset (want %s)", bc.Config, strings.Join(models.PresetNames(), ", "))
	}
	if bc.Batch < 0 || bc.Batch > maxBatch {
		return nil, usageError("--set batch=%d: want 1 to %d, or 0 for the preset's", bc.Batch, maxBatch)
	}
	if bc.Batch == 0 {
		bc.Batch = mc.Batch
	}
	mc.Batch = bc.Batch
	mc.Dropout = bc.Dropout
	if err := mc.Validate(); err != nil {
		return nil, usageError("%v", err)
	}
	var opts []models.ModelOption
	switch bc.Exec {
	case "arena":
	case "tape":
		opts = append(opts, models.WithTapeMachine())
	default:
		return nil, usageError("--set executor=%s: want arena or tape", bc.Exec)
	}
	if err := models.SetBLAS(bc.BLAS); err != nil {
		return nil, usageError("--set blas=%s: %v", bc.BLAS, err)
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
	for range bc.Warmup {
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
	med := gptMedian(times)
	r := reports.New("bench-train", fmt.Sprintf("Training step of %s (B=%d, T=%d): time and allocation", bc.Config, mc.Batch, mc.Block))
	r.Metric("median_step_ms", float64(med.Microseconds())/1e3)
	r.Metric("min_step_ms", float64(slicesMin(times).Microseconds())/1e3)
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
	r.Check("loss falls on the fixed batch", losses[steps-1] < losses[0],
		"loss %.4f at the first timed step, %.4f at the last: the steps update the model", losses[0], losses[steps-1])
	r.Note("One step is forward, backward and AdamW (lr 1e-3) on one fixed random batch, as the reference's bench mode. allocs_per_step and bytes_allocated_per_step are runtime.MemStats deltas (Mallocs, TotalAlloc) over the timed steps divided by their number; peak_heap_bytes is the largest %s (HeapAlloc) sampled every 2 ms during them.", heapMetric)
	return r, nil
}

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
