package dataparallel

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/parallel"
	"gptlab/reports"
)

// The data-parallel lab: the GPT trained on P real processes, each on its
// shard of the batch, with the gradients all-reduced in buckets that start
// while the backward goes on (data_parallel_step.go), checked against one
// process training on the whole batch from the same seed and data:
//
//   - the first step's all-reduced gradient equals the full batch's
//     (each rank's mean-loss gradient weighted by its share of the
//     sequences); with unequal shards (5 and 3 sequences) the weighting is
//     what makes it exact, and plain averaging is shown wrong;
//   - after K steps the ranks' parameters are bitwise identical to each
//     other and within 1e-5 of the single process's (3·lr where the first
//     gradient is below 1e-6: there AdamW's normalised step amplifies
//     rounding, as the GPT's own parity test allows);
//   - ZeRO-1 (reduce-scatter, each rank's AdamW shard, all-gather) gives
//     bitwise the parameters of plain data parallelism with 1/P of the
//     optimizer state per rank;
//   - the bytes each rank sends equal the ring model 2(p-1)/p·N per step;
//   - step time with and without overlap, and over a sweep of bucket sizes.
//
// CPU processes on one machine teach the algebra and the bytes; the step
// times say nothing about GPU scaling.

// dpConfig holds the settings of the data-parallel lab.
type dpConfig struct {
	Config     string  `set:"config" help:"GPT preset: tiny, small or baby"`
	Ranks      int     `set:"ranks" help:"processes the lab launches when run on its own (under gptlab launch or mpirun: the job's)"`
	Batch      int     `set:"batch" help:"global batch in sequences, split equally across the ranks"`
	Unequal    []int   `set:"unequal" help:"sequences per rank of the unequal split (sum = batch)"`
	Steps      int     `set:"steps" help:"training steps K compared against one process"`
	LR         float64 `set:"lr" help:"AdamW learning rate (constant, no gradient clipping)"`
	BucketMB   float64 `set:"bucket-mb" help:"bucket cap in MiB (DDP's bucket_cap_mb)"`
	FirstMB    float64 `set:"first-bucket-mb" help:"cap of the first bucket in MiB (DDP's 1 MiB, so the first all-reduce starts early)"`
	SweepKiB   []int   `set:"sweep-kib" help:"bucket caps of the sweep in KiB (one bucket for everything is added)"`
	TimedSteps int     `set:"timed-steps" help:"timed steps per variant and bucket plan (interleaved; medians)"`
	Transport  string  `set:"transport" help:"auto, shm, tcp, or mpi (under mpirun, a -tags mpi build)"`
	// AllreduceKiB: the bench's sweep, on the lab's ranks and transport.
	AllreduceKiB []int `set:"allreduce-kib" help:"sizes in KiB of the all-reduce timed on the lab's ranks (gptlab bench allreduce's sweep)"`
}

var dpDefaults = dpConfig{
	Config: "baby", Ranks: 2, Batch: 8, Unequal: []int{5, 3}, Steps: 10, LR: 1e-3, BucketMB: 25, FirstMB: 1,
	SweepKiB: []int{4, 16, 64, 256, 1024}, TimedSteps: 15, Transport: "auto",
	AllreduceKiB: kib(doublings(4<<10, 64<<20)),
}

// kib is sizes in bytes as KiB.
func kib(bytes []int) []int {
	out := make([]int, len(bytes))
	for i, b := range bytes {
		out[i] = b >> 10
	}
	return out
}

// Lab is the data-parallel lab.
var Lab = lab.New("data-parallel", "two OS processes, all-reduce of gradients, equal to the full batch", dpDefaults, dpQuick, runDataParallel)

// dpQuick is the small preset, a few steps, a short sweep.
func dpQuick(c *dpConfig) {
	c.Config, c.Steps, c.TimedSteps = "small", min(c.Steps, 4), min(c.TimedSteps, 5)
	c.SweepKiB = []int{4, 64}
	c.AllreduceKiB = []int{4, 16 << 10}
}

// dpTolerances are the bounds.
const (
	dpGradTol   = 1e-6 // max over tensors of ‖g_dp − g_full‖₂/‖g_full‖₂
	dpParamTol  = 1e-5 // |p_dp − p_full| after K steps where |g_first| ≥ dpSmallGrad
	dpSmallGrad = 1e-6
	dpBytesTol  = 0.01 // measured bytes against the ring model
	// dpControlMin: plain averaging of unequal shards must miss the full
	// batch's gradient by at least this (a hundred times the bound).
	dpControlMin = 100 * dpGradTol
)

func runDataParallel(ctx context.Context, cfg *dpConfig, opt lab.Options) (*reports.Report, error) {
	if parallel.UnderMPI() && cfg.Transport == "auto" {
		cfg.Transport = "mpi" // mpirun's ranks have no torchrun variables
	}
	if err := cfg.validate(cfg.Ranks); err != nil {
		return nil, err
	}
	return lab.OnRanks(ctx, "data-parallel", cfg, opt, cfg.Ranks, cfg.Transport, func(ctx context.Context, c *parallel.Comm) (*reports.Report, error) {
		cfg.Ranks = c.Size() // under a launcher the job decides
		if err := cfg.validate(c.Size()); err != nil {
			return nil, err
		}
		d, err := dataParallelRank(ctx, c, cfg, opt)
		if err != nil {
			return nil, err
		}
		r := reports.New("data-parallel", "Data parallelism: P processes, bucketed all-reduce, against one process")
		if d != nil { // rank 0
			d.report(r)
		}
		return r, nil
	})
}

// validate checks the settings for a job of p ranks.
func (c *dpConfig) validate(p int) error {
	if _, err := models.Preset(c.Config); err != nil {
		return lab.Usagef("--set config=%s: want one of %s", c.Config, strings.Join(models.PresetNames(), ", "))
	}
	if !slices.Contains(parallel.Transports, c.Transport) {
		return lab.Usagef("--set transport=%s: want one of %s", c.Transport, strings.Join(parallel.Transports, ", "))
	}
	if err := parallel.CheckTransport(c.Transport); err != nil { // shm where the system has none (Windows)
		return lab.Usagef("--set transport=%s: %v", c.Transport, err)
	}
	if c.Transport == "mpi" && !parallel.MPIBuilt {
		return lab.Usagef("--set transport=mpi: %v", parallel.ErrNoMPI)
	}
	if p < 2 || p > 8 {
		return lab.Usagef("--set ranks=%d: want 2 to 8 processes", p)
	}
	if c.Batch < p || c.Batch%p != 0 || c.Batch > 256 {
		return lab.Usagef("--set batch=%d: want a multiple of the %d ranks, at most 256", c.Batch, p)
	}
	sum, equal := 0, true
	for _, n := range c.Unequal {
		sum += n
		equal = equal && n == c.Unequal[0]
		if n < 1 {
			return lab.Usagef("--set unequal=%s: every rank needs at least one sequence", intList(c.Unequal))
		}
	}
	if len(c.Unequal) != p || sum != c.Batch || equal {
		return lab.Usagef("--set unequal=%s: want %d unequal shares (one per rank) summing to batch=%d", intList(c.Unequal), p, c.Batch)
	}
	if c.Steps < 1 || c.Steps > 1000 {
		return lab.Usagef("--set steps=%d: want 1 to 1000", c.Steps)
	}
	if !(c.LR > 0 && c.LR <= 1) {
		return lab.Usagef("--set lr=%g: want 0 < lr <= 1", c.LR)
	}
	for _, b := range []struct {
		key string
		mb  float64
	}{{"bucket-mb", c.BucketMB}, {"first-bucket-mb", c.FirstMB}} {
		if !(b.mb*(1<<20) >= 1<<10 && b.mb <= 1024) {
			return lab.Usagef("--set %s=%g: want 1 KiB (0.0009765625) to 1024 MiB", b.key, b.mb)
		}
	}
	for _, k := range c.SweepKiB {
		if k < 1 || k > 1<<20 {
			return lab.Usagef("--set sweep-kib=%s: want caps of 1 KiB to 1 GiB", intList(c.SweepKiB))
		}
	}
	if c.TimedSteps < 1 || c.TimedSteps > 1000 {
		return lab.Usagef("--set timed-steps=%d: want 1 to 1000", c.TimedSteps)
	}
	if len(c.AllreduceKiB) < 1 || len(c.AllreduceKiB) > 24 {
		return lab.Usagef("--set allreduce-kib=%s: want 1 to 24 sizes", intList(c.AllreduceKiB))
	}
	for _, k := range c.AllreduceKiB {
		if k < 1 || k > 1<<20 {
			return lab.Usagef("--set allreduce-kib=%s: want sizes of 1 KiB to 1 GiB", intList(c.AllreduceKiB))
		}
	}
	return nil
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// dpSplit is how the global batch's rows are shared: rank r takes rows
// [off[r], off[r]+n[r]).
type dpSplit struct{ n, off []int }

func newDPSplit(n []int) dpSplit {
	s := dpSplit{n: n}
	at := 0
	for _, k := range n {
		s.off = append(s.off, at)
		at += k
	}
	return s
}

func equalSplit(batch, p int) dpSplit {
	n := make([]int, p)
	for i := range n {
		n[i] = batch / p
	}
	return newDPSplit(n)
}

// weight is rank r's share of the global batch: the factor that turns
// its mean-loss gradient into its part of the full batch's.
func (s dpSplit) weight(r int) float32 {
	total := 0
	for _, k := range s.n {
		total += k
	}
	return float32(float64(s.n[r]) / float64(total))
}

// rows cuts rank r's rows out of a global batch (B, T).
func (s dpSplit) rows(r, T int, idx, tgt []int32) ([]int32, []int32) {
	lo, hi := s.off[r]*T, (s.off[r]+s.n[r])*T
	return idx[lo:hi], tgt[lo:hi]
}

// dpBucketPlan names a bucket layout of the report: caps in bytes.
type dpBucketPlan struct {
	name       string
	first, cap int
}

// plans are the bucket layouts the lab times: the configured one first,
// then the sweep's caps and one bucket for everything; a layout already
// in the list (the configured plan is one bucket when its first bucket
// holds every gradient) is timed once.
func (c *dpConfig) plans(gradBytes int) []dpBucketPlan {
	mib := func(x float64) int { return int(math.Round(x * (1 << 20))) }
	cap, first := mib(c.BucketMB), min(mib(c.FirstMB), mib(c.BucketMB))
	name := fmt.Sprintf("%s, 1st %s", reports.FormatBytes(float64(cap)), reports.FormatBytes(float64(first)))
	oneBucket := first >= gradBytes
	if oneBucket {
		name += ": one bucket"
	}
	out := []dpBucketPlan{{name, first, cap}}
	for _, k := range c.SweepKiB {
		if k<<10 < gradBytes {
			out = append(out, dpBucketPlan{reports.FormatBytes(float64(k << 10)), k << 10, k << 10})
		}
	}
	if oneBucket {
		return out
	}
	return append(out, dpBucketPlan{"one bucket", gradBytes, gradBytes})
}
