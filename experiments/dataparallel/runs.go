package dataparallel

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/parallel"
)

// dpRank is one rank's side of the lab: its communicator, the parameters
// every local model reads (reset to the common start before each run),
// the models of its local batch shapes, and the batches every rank draws
// alike from the seed.
type dpRank struct {
	c       *parallel.Comm
	mc      models.Config
	adam    models.AdamWConfig
	lr      float64
	p, init *models.Params
	local   map[int]*models.Model // by local batch size
	cur     *dpStepper            // the stepper the models' gradient hooks feed
	batches [][2][]int32          // global batches (B, T): inputs, targets
	equal   dpSplit
}

func newDPRank(c *parallel.Comm, cfg *dpConfig, seed int64) (*dpRank, error) {
	mc, _ := models.Preset(cfg.Config) // validated
	mc.Batch = cfg.Batch
	data, err := models.DefaultCorpus(uint64(seed), mc.Block)
	if err != nil {
		return nil, err
	}
	bt, err := models.NewBatcher(data.Train, cfg.Batch, mc.Block, uint64(seed), models.StreamTrain)
	if err != nil {
		return nil, err
	}
	adam := models.DefaultAdamW()
	adam.LR, adam.GradClip = cfg.LR, 0
	init := models.NewParams(mc, seed)
	r := &dpRank{c: c, mc: mc, adam: adam, lr: cfg.LR, p: init.Clone(), init: init, local: map[int]*models.Model{},
		equal: equalSplit(cfg.Batch, c.Size())}
	for range cfg.Steps {
		idx, tgt := bt.Batch()
		r.batches = append(r.batches, [2][]int32{idx, tgt})
	}
	return r, nil
}

func (r *dpRank) close() {
	for _, m := range r.local {
		m.Close()
	}
}

// model is the training model of local batch size B on the rank's
// parameters, its gradient hook installed once.
func (r *dpRank) model(B int) (*models.Model, error) {
	if m := r.local[B]; m != nil {
		return m, nil
	}
	m, err := models.NewModel(r.mc, r.p, B, r.mc.Block, true)
	if err != nil {
		return nil, err
	}
	if err := m.OnGradReady(func(name string) { r.cur.ready(name) }); err != nil {
		m.Close()
		return nil, err
	}
	r.local[B] = m
	return m, nil
}

// stepper is a stepper of this rank's shard of split.
func (r *dpRank) stepper(split dpSplit, buckets []dpBucket, overlap bool) (*dpStepper, error) {
	m, err := r.model(split.n[r.c.Rank()])
	if err != nil {
		return nil, err
	}
	return newDPStepper(r.c, m, buckets, split.weight(r.c.Rank()), overlap), nil
}

// backward runs s on this rank's rows of global batch k.
func (r *dpRank) backward(s *dpStepper, split dpSplit, k int) (float32, error) {
	b := r.batches[k%len(r.batches)]
	idx, tgt := split.rows(r.c.Rank(), r.mc.Block, b[0], b[1])
	r.cur = s
	return s.backward(idx, tgt)
}

// dpReference is one process on the full batch: the first gradient, the
// loss of every step and the parameters after them.
type dpReference struct {
	first  []float32
	losses []float64
	final  []float32
}

func (r *dpRank) reference() (*dpReference, error) {
	p := r.init.Clone()
	m, err := models.NewModel(r.mc, p, r.mc.Batch, r.mc.Block, true)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	opt := models.NewAdamW(p, r.adam)
	ref := &dpReference{}
	for k, b := range r.batches {
		loss, err := m.Step(b[0], b[1])
		if err != nil {
			return nil, err
		}
		g, err := opt.Gradients(m)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			ref.first = slices.Clone(g)
		}
		if _, err := opt.StepFlat(g, r.lr); err != nil {
			return nil, err
		}
		ref.losses = append(ref.losses, float64(loss))
	}
	ref.final = slices.Clone(p.Data())
	return ref, nil
}

// dpRun is what one rank saw in K steps of a data-parallel run.
type dpRun struct {
	first      []float32 // the reduced gradient of the first step (plain DP)
	final      []float32 // the parameters after the last step
	losses     []float64 // this rank's local losses
	moved      []parallel.Stats
	stateBytes int64
	lo, hi     int // the optimizer's elements (ZeRO-1: this rank's shard)
	// toCome: gradients still to come in the backward when the first
	// bucket's all-reduce started (first step).
	toCome, params, buckets int
}

// trainDP runs K steps of plain data parallelism: the bucketed, overlapped
// all-reduce, then the same AdamW step on every rank.
func (r *dpRank) trainDP(ctx context.Context, buckets []dpBucket) (*dpRun, error) {
	r.p.CopyFrom(r.init)
	opt := models.NewAdamW(r.p, r.adam)
	s, err := r.stepper(r.equal, buckets, true)
	if err != nil {
		return nil, err
	}
	run := &dpRun{stateBytes: opt.StateBytes(), lo: 0, hi: r.p.Count(), params: len(r.p.Names()), buckets: len(buckets)}
	for k := range r.batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		before := r.c.Stats()
		loss, err := r.backward(s, r.equal, k)
		if err != nil {
			return nil, err
		}
		run.moved = append(run.moved, r.c.Stats().Sub(before))
		if k == 0 {
			run.first = slices.Clone(s.flat)
			run.toCome = s.toComeAtFirst
		}
		if _, err := opt.StepFlat(s.flat, r.lr); err != nil {
			return nil, err
		}
		run.losses = append(run.losses, float64(loss))
	}
	run.final = slices.Clone(r.p.Data())
	return run, nil
}

// trainZeRO1 runs K steps of ZeRO-1: the staged gradient reduce-scattered,
// this rank's shard updated by its own AdamW shard (its moments alone),
// the parameters all-gathered.
func (r *dpRank) trainZeRO1(ctx context.Context) (*dpRun, error) {
	r.p.CopyFrom(r.init)
	n := r.p.Count()
	lo, hi := r.c.Segment(n)
	opt, err := models.NewAdamWShard(r.p, r.adam, lo, hi)
	if err != nil {
		return nil, err
	}
	s, err := r.stepper(r.equal, nil, false)
	if err != nil {
		return nil, err
	}
	run := &dpRun{stateBytes: opt.StateBytes(), lo: lo, hi: hi, params: len(r.p.Names())}
	for k := range r.batches {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		before := r.c.Stats()
		loss, err := r.backward(s, r.equal, k)
		if err == nil {
			err = r.c.ReduceScatter(s.flat)
		}
		if err == nil {
			// sumSq only matters to clipping, which is off (GradClip 0).
			_, err = opt.StepShard(s.flat[lo:hi], r.lr, 0)
		}
		if err == nil {
			err = r.c.AllGather(r.p.Data())
		}
		if err != nil {
			return nil, err
		}
		run.moved = append(run.moved, r.c.Stats().Sub(before))
		run.losses = append(run.losses, float64(loss))
	}
	run.final = slices.Clone(r.p.Data())
	return run, nil
}

// reduceOnce is the reduced gradient of the first batch under split with
// this rank's weight w: the sample-count weighting, or plain averaging.
func (r *dpRank) reduceOnce(split dpSplit, w float32, buckets []dpBucket) ([]float32, error) {
	r.p.CopyFrom(r.init)
	s, err := r.stepper(split, buckets, true)
	if err != nil {
		return nil, err
	}
	s.weight = w
	if _, err := r.backward(s, split, 0); err != nil {
		return nil, err
	}
	return slices.Clone(s.flat), nil
}

// dpTiming is rank 0's step times of one bucket plan, interleaved.
type dpTiming struct {
	plan                      dpBucketPlan
	buckets                   int
	local, noOverlap, overlap time.Duration // medians
	// toCome: gradients still to come in the backward when the overlapped
	// step's first all-reduce started (its last timed step).
	toCome int
}

// timePlan times full steps (forward, backward, reduction, AdamW) of one
// bucket plan three ways, interleaved step by step after a barrier:
// the all-reduces started during the backward (overlap), the same ones
// after it, and no communication at all (the compute alone).
func (r *dpRank) timePlan(ctx context.Context, pl dpBucketPlan, steps int) (dpTiming, error) {
	buckets := dpBuckets(r.p.Count(), pl.first, pl.cap)
	var variants [3]*dpStepper // local, after the backward, overlapped
	for i, v := range []struct {
		b       []dpBucket
		overlap bool
	}{{nil, false}, {buckets, false}, {buckets, true}} {
		s, err := r.stepper(r.equal, v.b, v.overlap)
		if err != nil {
			return dpTiming{}, err
		}
		variants[i] = s
	}
	opt := models.NewAdamW(r.p, r.adam)
	const warm = 1
	var times [3][]time.Duration
	for i := range warm + steps {
		if err := ctx.Err(); err != nil {
			return dpTiming{}, err
		}
		for j := range variants {
			v := (i + j) % len(variants) // each variant first in turn
			s := variants[v]
			if err := r.c.Barrier(); err != nil {
				return dpTiming{}, err
			}
			t0 := time.Now()
			if _, err := r.backward(s, r.equal, i); err != nil {
				return dpTiming{}, err
			}
			if _, err := opt.StepFlat(s.flat, r.lr); err != nil {
				return dpTiming{}, err
			}
			if i >= warm {
				times[v] = append(times[v], time.Since(t0))
			}
		}
	}
	med := lab.MedianDuration
	return dpTiming{plan: pl, buckets: len(buckets), local: med(times[0]), noOverlap: med(times[1]), overlap: med(times[2]),
		toCome: variants[2].toComeAtFirst}, nil
}

// gatherJSON gives every rank each rank's v (encoded as JSON): one
// broadcast of the length and one of the bytes per rank, outside any
// measured step.
func gatherJSON[T any](c *parallel.Comm, v T) ([]T, error) {
	mine, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]T, c.Size())
	for root := range c.Size() {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(mine)))
		if err := c.BroadcastBytes(n[:], root); err != nil {
			return nil, err
		}
		buf := make([]byte, binary.LittleEndian.Uint64(n[:]))
		if root == c.Rank() {
			copy(buf, mine)
		}
		if err := c.BroadcastBytes(buf, root); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(buf, &out[root]); err != nil {
			return nil, fmt.Errorf("rank %d's summary: %w", root, err)
		}
	}
	return out, nil
}
