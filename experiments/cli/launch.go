package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"gptlab/experiments/lab"
	"gptlab/parallel"
)

func init() {
	RegisterCommand(&Command{
		Name:  "launch",
		Usage: "--nproc N [--master ADDR] [--world-size W] [--deadline D] [--max-nproc M] -- GPTLAB-ARGS...",
		Short: "run a gptlab command as the N ranks of one job, with torchrun's environment",
		Long: "Starts N copies of this gptlab with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set; " +
			"a rank started by hand elsewhere with the same variables joins the same way (--world-size counts it). " +
			"--master is checked before any rank starts: it must resolve to an address of this machine (rank 0 listens there) with a free port. " +
			"Rank 0's stdout is the job's, and so is its stderr but for its failure line; the other ranks' stdout is discarded. " +
			"Every rank's stderr goes to a log file (each line prefixed \"rank N: \"), removed when the job succeeds. " +
			"A rank that dies, hangs past the deadline or sends a malformed frame makes the others fail naming it; " +
			"the launcher then stops them and ends with one line saying which rank failed and why, and naming the log. " +
			"Exit status: the job's (the failing rank's own status; 3 for a rank that was killed or stopped), " +
			"130 when interrupted.",
		Setup: launchCommand,
	})
}

func launchCommand(fs *flag.FlagSet) Runner {
	nproc := fs.Int("nproc", 0, "worker processes `N` to start here (ranks 0..N-1)")
	master := fs.String("master", "", "`ADDR` (HOST:PORT) of rank 0's rendezvous (default 127.0.0.1 and a free port)")
	world := fs.Int("world-size", 0, "ranks `W` in the job, when ranks N.. are started by hand elsewhere (default N)")
	deadline := fs.Duration("deadline", parallel.DefaultDeadline, "bound `D` on every wait of the workers")
	maxProc := fs.Int("max-nproc", defaultMaxProc(), "refuse an --nproc above `M` (4x this machine's cores); "+
		"past the cores the ranks time-share them, and far past it a job can exhaust the machine's memory or processes and stall it")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		switch {
		case *nproc < 1:
			return lab.Usagef("launch: --nproc %d: want at least 1", *nproc)
		case *maxProc < 1:
			return lab.Usagef("launch: --max-nproc %d: want at least 1", *maxProc)
		case *nproc > *maxProc && *maxProc == defaultMaxProc():
			return lab.Usagef("launch: --nproc %d: more than %d ranks (4x this machine's %d cores), each a process of its own; --max-nproc %d runs it anyway", *nproc, *maxProc, runtime.NumCPU(), *nproc)
		case *nproc > *maxProc:
			return lab.Usagef("launch: --nproc %d: more than --max-nproc %d", *nproc, *maxProc)
		case len(args) == 0:
			return lab.Usagef("launch: nothing to run: give the gptlab arguments after --")
		case *world != 0 && *world < *nproc:
			return lab.Usagef("launch: --world-size %d is smaller than --nproc %d", *world, *nproc)
		case *deadline <= 0:
			return lab.Usagef("launch: --deadline %v: want > 0", *deadline)
		}
		if *master != "" {
			if err := parallel.CheckMaster(*master); err != nil {
				return lab.Usagef("launch: %v", err)
			}
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		err = parallel.Launch(ctx, parallel.LaunchConfig{
			NProc: *nproc, WorldSize: *world, Master: *master, Deadline: *deadline,
			Path: self, Args: args, Stdout: stdout, Stderr: stderr, Grace: min(3*time.Second, *deadline),
			LogRanks: true, FailPrefix: "gptlab: ",
		})
		var je *parallel.JobError
		var ie *parallel.InterruptError
		switch {
		case errors.As(err, &ie):
			msg := "launch: interrupted; every worker stopped"
			if ie.Said != "" {
				msg += " (rank 0: " + ie.Said + ")"
			}
			if ie.Log != "" {
				msg += "; every rank's lines are in " + ie.Log
			}
			return lab.Interruptedf("%s", msg)
		case errors.Is(err, parallel.ErrInterrupted):
			return lab.Interruptedf("launch: interrupted; every worker stopped")
		case errors.As(err, &je):
			return jobStatus(je)
		}
		return err
	}
}

// defaultMaxProc is --max-nproc's default: 4x the cores.
func defaultMaxProc() int { return 4 * runtime.NumCPU() }

// jobStatus ends the launcher with the job's status: the failing rank's
// own (its check failed: 1, bad input: 2, ...), or 3 for a rank that was
// killed or stopped; the line names the rank and the cause.
func jobStatus(je *parallel.JobError) error {
	msg := "launch: " + je.Msg
	switch je.Status {
	case exitChecksFailed:
		return fmt.Errorf("%s: %w", msg, errChecksFailed) // the report said which check
	case exitUsage:
		return lab.Usagef("%s", msg)
	case exitInterrupted:
		return lab.Interruptedf("%s", msg)
	}
	return lab.FailedJob(msg)
}
