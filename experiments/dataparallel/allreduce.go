package dataparallel

import (
	"context"
	"math"
	"slices"
	"time"

	"gptlab/experiments/lab"
	"gptlab/parallel"
)

// AllreduceConfig are the settings of `gptlab bench allreduce`.
type AllreduceConfig struct {
	Transport string `set:"transport" help:"all (shm and tcp, OpenMPI beside them), shm, tcp, or mpi (under mpirun, -tags mpi builds)"`
	MinBytes  int    `set:"min-bytes" help:"the smallest all-reduce; sizes double up to max-bytes"`
	MaxBytes  int    `set:"max-bytes" help:"the largest all-reduce"`
	MPI       string `set:"mpi" help:"OpenMPI beside ours: auto (a -tags mpi gptlab: this one, gptlab-mpi beside it or on PATH), off, or a path"`
}

var DefaultAllreduce = AllreduceConfig{Transport: "all", MinBytes: 4 << 10, MaxBytes: 64 << 20, MPI: "auto"}

// Sweep is one transport's all-reduce times over the sizes.
type Sweep struct {
	name  string // shm, tcp, mpi-vader, mpi-tcp
	ranks int
	rows  []sweepRow
	wrong int // sizes whose result differed from the exact sum
}

// Ranks is the number of ranks the sweep ran on.
func (s *Sweep) Ranks() int { return s.ranks }

type sweepRow struct {
	bytes  int
	iters  int
	median time.Duration
	min    time.Duration
	sent   float64 // payload bytes this rank sent per call (NaN: not observed)
	// batches are the per-call times of each batch (a sweep read back
	// from another process's report has its median and min alone).
	batches []time.Duration
}

// iterations is how many timed all-reduces a size gets: enough for a
// stable median at small sizes, a bounded time at large ones. They run in
// batches, back to back, as nccl-tests and the OSU benchmarks time them.
func iterations(bytes int) int { return min(1000, max(2*batches, (256<<20)/bytes)) }

const (
	batches = 15 // the median is over batches
	warmup  = 3  // untimed all-reduces before the batches
)

// RunSweep joins the job over one transport and times the all-reduces.
func RunSweep(ctx context.Context, env parallel.Env, transport string, cfg AllreduceConfig) (*Sweep, int, error) {
	c, err := parallel.Join(ctx, env, parallel.Options{Transport: transport})
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	s, err := sweepOn(ctx, c, doublings(cfg.MinBytes, cfg.MaxBytes))
	if s != nil {
		s.name = transport
	}
	return s, c.Rank(), err
}

// doublings is lo, 2·lo, … up to hi.
func doublings(lo, hi int) []int {
	var sizes []int
	for b := lo; b <= hi; b *= 2 {
		sizes = append(sizes, b)
	}
	return sizes
}

// sweepOn times all-reduces of each size (bytes, multiples of 4) on the
// communicator's ranks, every rank calling it with the same sizes.
func sweepOn(ctx context.Context, c *parallel.Comm, sizes []int) (*Sweep, error) {
	p, r := c.Size(), c.Rank()
	s := &Sweep{name: c.Transport(), ranks: p}
	for _, bytes := range sizes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := bytes / 4
		buf := make([]float32, n)
		for i := range buf {
			buf[i] = benchValue(r, i)
		}
		// One untimed all-reduce of known values checks the sum and the
		// bytes; the timed ones reduce zeros in place, so repeating them
		// never overflows.
		before := c.Stats()
		if err := c.AllReduce(buf); err != nil {
			return nil, err
		}
		moved := c.Stats().Sub(before).Of(parallel.AllReduce)
		if !exactSum(buf, p) {
			s.wrong++
		}
		clear(buf)
		for range warmup {
			if err := c.AllReduce(buf); err != nil {
				return nil, err
			}
		}
		iters := iterations(bytes)
		per := iters / batches
		times := make([]time.Duration, batches)
		for b := range batches {
			if err := c.Barrier(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			for range per {
				if err := c.AllReduce(buf); err != nil {
					return nil, err
				}
			}
			times[b] = time.Since(t0) / time.Duration(per)
		}
		sent := float64(moved.Sent)
		if c.Transport() == "mpi" {
			sent = math.NaN() // MPI moves the bytes itself
		}
		s.rows = append(s.rows, sweepRow{bytes: bytes, iters: per * batches, median: lab.MedianDuration(times), min: slices.Min(times), sent: sent, batches: times})
	}
	return s, nil
}

// benchValue is rank r's element i: a multiple of 1/64 below 16 in
// magnitude, so every order of summation gives the exact sum.
func benchValue(r, i int) float32 {
	return float32((i*7919+r*104729)%2047-1023) / 64
}

func exactSum(buf []float32, p int) bool {
	for i, v := range buf {
		var want float32
		for r := range p {
			want += benchValue(r, i)
		}
		if v != want {
			return false
		}
	}
	return true
}
