package experiments

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"gptlab/parallel"
)

func init() {
	RegisterCommand(&Command{
		Name:  "launch",
		Usage: "--nproc N [--master ADDR] [--world-size W] [--deadline D] -- <gptlab arguments>",
		Short: "run a gptlab command as the N ranks of one job, with torchrun's environment",
		Long: "Starts N copies of this gptlab with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT set; " +
			"a rank started by hand elsewhere with the same variables joins the same way (--world-size counts it). " +
			"Rank 0's output is the job's; the other ranks' stdout is discarded and their stderr prefixed \"rank N: \". " +
			"A rank that dies, hangs past the deadline or sends a malformed frame makes the others fail naming it; " +
			"the launcher then stops them and ends with one line saying which rank failed and why. " +
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
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		switch {
		case *nproc < 1:
			return usageError("launch: --nproc %d: want at least 1", *nproc)
		case len(args) == 0:
			return usageError("launch: nothing to run: give the gptlab arguments after --")
		case *world != 0 && *world < *nproc:
			return usageError("launch: --world-size %d is smaller than --nproc %d", *world, *nproc)
		case *deadline <= 0:
			return usageError("launch: --deadline %v: want > 0", *deadline)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: %w", err)
		}
		err = parallel.Launch(ctx, parallel.LaunchConfig{
			NProc: *nproc, WorldSize: *world, Master: *master, Deadline: *deadline,
			Path: self, Args: args, Stdout: stdout, Stderr: stderr, Grace: min(3*time.Second, *deadline),
		})
		var je *parallel.JobError
		switch {
		case errors.Is(err, parallel.ErrInterrupted):
			return interruptedf("launch: interrupted; every worker stopped")
		case errors.As(err, &je):
			return jobStatus(je)
		}
		return err
	}
}

// jobStatus ends the launcher with the job's status: the failing rank's
// own (its check failed: 1, bad input: 2, ...), or 3 for a rank that was
// killed or stopped; the line names the rank and the cause.
func jobStatus(je *parallel.JobError) error {
	msg := "launch: " + je.Msg
	switch je.Status {
	case exitChecksFailed:
		return fmt.Errorf("%s: %w", msg, errChecksFailed) // the report said which check
	case exitUsage:
		return usageError("%s", msg)
	case exitInterrupted:
		return interruptedf("%s", msg)
	}
	return &failedJob{msg}
}

// failedJob is a job that could not complete: a rank died, hung or sent a
// malformed frame. One line, exit 3.
type failedJob struct{ msg string }

func (e *failedJob) Error() string        { return e.msg }
func (e *failedJob) Is(target error) bool { return target == errInternal }

// jobError turns a collective's failure (a *parallel.Error: the same on
// every rank, naming the rank at fault) into a one-line exit 3.
func jobError(err error) error {
	var pe *parallel.Error
	if errors.As(err, &pe) {
		return &failedJob{err.Error()}
	}
	return err
}
