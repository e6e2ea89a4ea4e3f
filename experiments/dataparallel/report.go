package dataparallel

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/parallel"
)

// dpSummary is what each rank tells rank 0 at the end.
type dpSummary struct {
	Rank       int
	Differ     int // elements of its DP parameters after K steps that differ from rank 0's
	ZeroDiffer int // elements of its ZeRO-1 parameters that differ from its DP parameters (see zeroOneBucket)
	Losses     []float64
	Moved      []parallel.Stats // DP, per step
	ZeroMoved  []parallel.Stats // ZeRO-1, per step
	DPState    int64
	ZeroState  int64
	Lo, Hi     int // its ZeRO-1 shard
}

// dataParallelRank is the lab's work on one rank; it returns rank 0's
// result (nil on the other ranks).
func dataParallelRank(ctx context.Context, c *parallel.Comm, cfg *dpConfig, opt lab.Options) (*dpResult, error) {
	r, err := newDPRank(c, cfg, opt.Seed)
	if err != nil {
		return nil, err
	}
	defer r.close()
	logf := func(format string, args ...any) {
		if c.Rank() == 0 {
			fmt.Fprintf(opt.Log, "data-parallel: "+format+"\n", args...)
		}
	}
	n := r.p.Count()
	plans := cfg.plans(4 * n)
	buckets := dpBuckets(n, plans[0].first, plans[0].cap)
	// Every rank computes the single process's run (the same bits on
	// each: same seed, data and code), so none waits on another for it
	// past the communicator's deadline; rank 0's is compared.
	logf("one process on the full batch of %d, %d steps", cfg.Batch, cfg.Steps)
	ref, err := r.reference()
	if err != nil {
		return nil, err
	}
	logf("%d ranks over %s: data parallelism, %d steps in %d buckets", c.Size(), c.Transport(), cfg.Steps, len(buckets))
	dp, err := r.trainDP(ctx, buckets)
	if err != nil {
		return nil, err
	}
	fromRoot := slices.Clone(dp.final)
	if err := c.Broadcast(fromRoot, 0); err != nil {
		return nil, err
	}
	unequal := newDPSplit(cfg.Unequal)
	weighted, err := r.reduceOnce(unequal, unequal.weight(c.Rank()), buckets)
	if err != nil {
		return nil, err
	}
	plain, err := r.reduceOnce(unequal, 1/float32(c.Size()), buckets)
	if err != nil {
		return nil, err
	}
	logf("ZeRO-1, %d steps", cfg.Steps)
	zero, err := r.trainZeRO1(ctx)
	if err != nil {
		return nil, err
	}
	// ZeRO-1's reduce-scatter sums each element in the order of its
	// segment of the whole gradient; a bucket's all-reduce, in the order
	// of its segment of the bucket. Two terms have no order, so on 2
	// ranks any buckets give the same bits; on more, plain DP with one
	// bucket is the run with ZeRO-1's sums.
	zeroRef, oneBucket := dp.final, c.Size() > 2 && len(buckets) > 1
	if oneBucket {
		one, err := r.trainDP(ctx, dpBuckets(n, 4*n, 4*n))
		if err != nil {
			return nil, err
		}
		zeroRef = one.final
	}
	var timings []dpTiming
	for _, pl := range plans {
		logf("timing buckets of %s", pl.name)
		t, err := r.timePlan(ctx, pl, cfg.TimedSteps)
		if err != nil {
			return nil, err
		}
		timings = append(timings, t)
	}
	logf("all-reduce of %s to %s over %s", sizeLabel(cfg.AllreduceKiB[0]<<10),
		sizeLabel(cfg.AllreduceKiB[len(cfg.AllreduceKiB)-1]<<10), c.Transport())
	sizes := make([]int, len(cfg.AllreduceKiB))
	for i, k := range cfg.AllreduceKiB {
		sizes[i] = k << 10
	}
	allreduce, err := sweepOn(ctx, c, sizes)
	if err != nil {
		return nil, err
	}
	sums, err := gatherJSON(c, dpSummary{
		Rank: c.Rank(), Differ: countDiffer(fromRoot, dp.final), ZeroDiffer: countDiffer(zero.final, zeroRef),
		Losses: dp.losses, Moved: dp.moved, ZeroMoved: zero.moved, DPState: dp.stateBytes, ZeroState: zero.stateBytes,
		Lo: zero.lo, Hi: zero.hi,
	})
	if err != nil {
		return nil, err
	}
	if c.Rank() != 0 {
		return nil, nil // rank 0 reports
	}
	return &dpResult{cfg: cfg, p: r.p, ref: ref, dp: dp, weighted: weighted, plain: plain, sums: sums, timings: timings,
		transport: c.Transport(), equal: r.equal, unequal: unequal, zeroOneBucket: oneBucket, allreduce: allreduce}, nil
}

// countDiffer counts the elements whose bits differ.
func countDiffer(a, b []float32) int {
	n := 0
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			n++
		}
	}
	return n
}

// maxRelDiff is the largest, over parameter tensors, of ‖a − b‖₂/‖b‖₂
// (b the reference), and the tensor where it is.
func maxRelDiff(p *models.Params, a, b []float32) (float64, string) {
	worst, at := 0.0, ""
	for _, name := range p.Names() {
		lo := p.Offset(name)
		hi := lo + len(p.Slice(name))
		if rel := lab.RelDiff(a[lo:hi], b[lo:hi]); rel > worst || at == "" {
			worst, at = rel, name
		}
	}
	return worst, at
}

// dpParity compares parameters after K steps with the single process's:
// elementwise, tight where the first gradient is at least dpSmallGrad,
// 3·lr elsewhere.
type dpParity struct {
	tight, loose           int     // elements in each class
	worstTight, worstLoose float64 // largest |diff| in each
	overTight, overLoose   int     // elements beyond their bound
}

func compareParams(got, want, firstGrad []float32, lr float64) dpParity {
	var q dpParity
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if math.Abs(float64(firstGrad[i])) >= dpSmallGrad {
			q.tight++
			q.worstTight = max(q.worstTight, d)
			if !(d <= dpParamTol) {
				q.overTight++
			}
		} else {
			q.loose++
			q.worstLoose = max(q.worstLoose, d)
			if !(d <= 3*lr) {
				q.overLoose++
			}
		}
	}
	return q
}

// dpResult is everything rank 0 reports.
type dpResult struct {
	cfg             *dpConfig
	p               *models.Params
	ref             *dpReference
	dp              *dpRun
	weighted, plain []float32
	sums            []dpSummary
	timings         []dpTiming
	transport       string
	equal, unequal  dpSplit
	// zeroOneBucket: ZeRO-1 was compared with plain DP of one bucket (on
	// more than 2 ranks, the run whose sums are ZeRO-1's), not the
	// bucketed run.
	zeroOneBucket bool
	allreduce     *Sweep // the all-reduce timed by size on the lab's ranks
}
