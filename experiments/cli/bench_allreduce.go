package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"gptlab/experiments/dataparallel"
	"gptlab/experiments/lab"
	"gptlab/parallel"
	"gptlab/reports"
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
			settingsTable(&dataparallel.DefaultAllreduce, nil).WriteText(w, reports.Width)
		},
	})
}

// benchAllreduceCommand is `gptlab bench allreduce`, run on every rank of
// a job.
func benchAllreduceCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	format, out := reportFlags(fs, "report.md, report.json and the figures")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("bench allreduce", args); err != nil {
			return err
		}
		cfg := dataparallel.DefaultAllreduce
		if err := lab.ApplySets(&cfg, sets); err != nil {
			return err
		}
		if !slices.Contains([]string{"all", "shm", "tcp", "mpi"}, cfg.Transport) {
			return lab.Usagef("--set transport=%s: want all, shm, tcp or mpi", cfg.Transport)
		}
		if cfg.MinBytes < 4 || cfg.MinBytes%4 != 0 || cfg.MaxBytes < cfg.MinBytes || cfg.MaxBytes > 1<<30 {
			return lab.Usagef("--set min-bytes=%d max-bytes=%d: want multiples of 4 bytes, 4 ≤ min ≤ max ≤ 1 GiB", cfg.MinBytes, cfg.MaxBytes)
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		var env parallel.Env
		switch {
		case cfg.Transport == "mpi":
			if !parallel.MPIBuilt {
				return lab.Usagef("--set transport=mpi: %v", parallel.ErrNoMPI)
			}
			if !parallel.UnderMPI() {
				return lab.Usagef("--set transport=mpi: run under mpirun (mpirun -np 2 gptlab bench allreduce --set transport=mpi)")
			}
		case !parallel.Launched():
			return lab.Usagef("bench allreduce: run it on a job's ranks: gptlab launch --nproc 2 -- bench allreduce (RANK is not set)")
		default:
			var err error
			if env, err = parallel.FromEnv(); err != nil {
				return lab.Usagef("bench allreduce: %v", err)
			}
		}
		transports := []string{cfg.Transport}
		if cfg.Transport == "all" {
			transports = []string{"shm", "tcp"}
		}
		var sweeps []*dataparallel.Sweep
		rank := 0
		log := logFor(*format, stderr) // a sign of life: a sweep takes seconds (under launch, rank 0's lines show)
		for _, tr := range transports {
			fmt.Fprintf(log, "bench allreduce: timing the all-reduce over %s, %s to %s\n", tr,
				reports.FormatBytes(float64(cfg.MinBytes)), reports.FormatBytes(float64(cfg.MaxBytes)))
			s, r, err := dataparallel.RunSweep(ctx, env, tr, cfg)
			if ctx.Err() != nil {
				return lab.Interruptedf("bench allreduce: interrupted; %s", nothingSaved(*out, "the report is written at the end"))
			}
			if err != nil {
				return lab.JobError(err)
			}
			rank = r
			sweeps = append(sweeps, s)
		}
		if rank != 0 {
			return nil // rank 0 reports
		}
		var mpiNote string
		var mpiErr error
		if cfg.Transport == "all" {
			var mpi []*dataparallel.Sweep
			mpi, mpiNote, mpiErr = dataparallel.OpenMPISweeps(ctx, cfg, sweeps[0].Ranks(), logFor(*format, stderr))
			if ctx.Err() != nil {
				return lab.Interruptedf("bench allreduce: interrupted; %s", nothingSaved(*out, "the report is written at the end"))
			}
			sweeps = append(sweeps, mpi...)
		}
		return emit(dataparallel.AllreduceReport(sweeps, cfg, mpiNote, mpiErr), *format, *out, stdout)
	}
}
