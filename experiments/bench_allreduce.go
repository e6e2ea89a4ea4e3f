package experiments

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"gptlab/parallel"
	"gptlab/reports"
)

// allreduceConfig are the settings of `gptlab bench allreduce`.
type allreduceConfig struct {
	Transport string `set:"transport" help:"all (shm and tcp, OpenMPI beside them), shm, tcp, or mpi (under mpirun, -tags mpi builds)"`
	MinBytes  int    `set:"min-bytes" help:"the smallest all-reduce; sizes double up to max-bytes"`
	MaxBytes  int    `set:"max-bytes" help:"the largest all-reduce"`
	MPI       string `set:"mpi" help:"OpenMPI beside ours: auto (a -tags mpi gptlab: this one, gptlab-mpi beside it or on PATH), off, or a path"`
}

var defaultAllreduce = allreduceConfig{Transport: "all", MinBytes: 4 << 10, MaxBytes: 64 << 20, MPI: "auto"}

// sweep is one transport's all-reduce times over the sizes.
type sweep struct {
	name  string // shm, tcp, mpi-vader, mpi-tcp
	ranks int
	rows  []sweepRow
	wrong int // sizes whose result differed from the exact sum
}

type sweepRow struct {
	bytes  int
	iters  int
	median time.Duration
	min    time.Duration
	sent   float64 // payload bytes this rank sent per call (NaN: not observed)
}

// iterations is how many timed all-reduces a size gets: enough for a
// stable median at small sizes, a bounded time at large ones. They run in
// batches, back to back, as nccl-tests and the OSU benchmarks time them.
func iterations(bytes int) int { return min(1000, max(2*batches, (256<<20)/bytes)) }

const (
	batches = 15 // the median is over batches
	warmup  = 3  // untimed all-reduces before the batches
)

func init() {
	RegisterCommand(&Command{
		Name:  "bench allreduce",
		Usage: "[--set key=value ...] [--format F] [--out DIR]",
		Short: "all-reduce from 4 KiB to 64 MiB on a job's ranks, ours beside OpenMPI's",
		Long: "Run it on the ranks of a job: gptlab launch --nproc 2 -- bench allreduce. Each transport (shm, " +
			"tcp) is swept in turn; then, where a -tags mpi gptlab and mpirun are found, OpenMPI's MPI_Allreduce " +
			"over its shared-memory and TCP transports, in the same run. Rank 0 prints the report: time, " +
			"algorithm and bus bandwidth (NCCL-tests), bytes against the ring model, an alpha-beta fit, the ratios " +
			"to OpenMPI. Under mpirun, --set transport=mpi sweeps OpenMPI's alone.",
		Setup: benchAllreduceCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&defaultAllreduce, nil).WriteText(w, reports.Width)
		},
	})
}

// benchAllreduceCommand is `gptlab bench allreduce`, run on every rank of
// a job.
func benchAllreduceCommand(fs *flag.FlagSet) Runner {
	var sets setFlag
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	format, out := reportFlags(fs, "report.md, report.json and the figures")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("bench allreduce", args); err != nil {
			return err
		}
		cfg := defaultAllreduce
		if err := applySets(&cfg, sets); err != nil {
			return err
		}
		if !slices.Contains([]string{"all", "shm", "tcp", "mpi"}, cfg.Transport) {
			return usageError("--set transport=%s: want all, shm, tcp or mpi", cfg.Transport)
		}
		if cfg.MinBytes < 4 || cfg.MinBytes%4 != 0 || cfg.MaxBytes < cfg.MinBytes || cfg.MaxBytes > 1<<30 {
			return usageError("--set min-bytes=%d max-bytes=%d: want multiples of 4 bytes, 4 ≤ min ≤ max ≤ 1 GiB", cfg.MinBytes, cfg.MaxBytes)
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		var env parallel.Env
		switch {
		case cfg.Transport == "mpi":
			if !parallel.MPIBuilt {
				return usageError("--set transport=mpi: %v", parallel.ErrNoMPI)
			}
			if !parallel.UnderMPI() {
				return usageError("--set transport=mpi: run under mpirun (mpirun -np 2 gptlab bench allreduce --set transport=mpi)")
			}
		case !parallel.Launched():
			return usageError("bench allreduce: run it on a job's ranks: gptlab launch --nproc 2 -- bench allreduce (RANK is not set)")
		default:
			var err error
			if env, err = parallel.FromEnv(); err != nil {
				return usageError("bench allreduce: %v", err)
			}
		}
		transports := []string{cfg.Transport}
		if cfg.Transport == "all" {
			transports = []string{"shm", "tcp"}
		}
		var sweeps []*sweep
		rank := 0
		for _, tr := range transports {
			s, r, err := runSweep(ctx, env, tr, cfg)
			if ctx.Err() != nil {
				return interruptedf("bench allreduce: interrupted; %s", nothingSaved(*out, "the report is written at the end"))
			}
			if err != nil {
				return jobError(err)
			}
			rank = r
			s.name = tr
			sweeps = append(sweeps, s)
		}
		if rank != 0 {
			return nil // rank 0 reports
		}
		var mpiNote string
		var mpiErr error
		if cfg.Transport == "all" {
			var mpi []*sweep
			mpi, mpiNote, mpiErr = openMPISweeps(ctx, cfg, sweeps[0].ranks, logFor(*format, stderr))
			if ctx.Err() != nil {
				return interruptedf("bench allreduce: interrupted; %s", nothingSaved(*out, "the report is written at the end"))
			}
			sweeps = append(sweeps, mpi...)
		}
		return emit(allreduceReport(sweeps, cfg, mpiNote, mpiErr), *format, *out, stdout)
	}
}

// runSweep joins the job over one transport and times the all-reduces.
func runSweep(ctx context.Context, env parallel.Env, transport string, cfg allreduceConfig) (*sweep, int, error) {
	c, err := parallel.Join(ctx, env, parallel.Options{Transport: transport})
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	s, err := sweepOn(ctx, c, doublings(cfg.MinBytes, cfg.MaxBytes))
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
func sweepOn(ctx context.Context, c *parallel.Comm, sizes []int) (*sweep, error) {
	p, r := c.Size(), c.Rank()
	s := &sweep{name: c.Transport(), ranks: p}
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
		slices.Sort(times)
		s.rows = append(s.rows, sweepRow{bytes: bytes, iters: per * batches, median: times[batches/2], min: times[0], sent: sent})
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
