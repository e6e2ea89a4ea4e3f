package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gptlab/parallel"
	"gptlab/reports"
)

// A lab that runs on several processes (data-parallel, tensor-parallel)
// calls OnRanks. Run on a job's ranks (gptlab launch --nproc 2 -- run LAB,
// or mpirun), each process is one rank: it joins the job and runs the
// lab's body, and rank 0's report is the lab's (the launcher discards the
// other ranks' output). Run on its own (gptlab run LAB, the exit gate),
// the lab launches a job of itself: nproc copies of this program running
// the same lab with the same settings, and returns rank 0's report, read
// back from its JSON, with its figures.

// RankBody is a multi-process lab's work on one rank.
type RankBody func(ctx context.Context, c *parallel.Comm) (*reports.Report, error)

// envFigures names the directory where a launched rank 0 draws its
// figures for the process that launched it.
const envFigures = "GPTLAB_LAB_FIGURES"

// OnRanks runs body on every rank of a job of nproc processes over
// transport (auto, shm, tcp or mpi), launching the job when this process
// is not one of its ranks.
func OnRanks(ctx context.Context, lab string, cfg any, opt Options, nproc int, transport string, body RankBody) (*reports.Report, error) {
	if !parallel.Launched() && !parallel.UnderMPI() {
		return launchLab(ctx, lab, cfg, opt, nproc, transport)
	}
	var env parallel.Env
	if transport != "mpi" {
		var err error
		if env, err = parallel.FromEnv(); err != nil {
			return nil, Usagef("%v", err)
		}
	}
	c, err := parallel.Join(ctx, env, parallel.Options{Transport: transport})
	if err != nil {
		return nil, JobError(err)
	}
	r, err := body(ctx, c)
	if cerr := c.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, JobError(err) // a collective's failure: one line naming the rank
	}
	// rank 0 prints the job's report (mpirun, unlike gptlab launch, would
	// show every rank's)
	r.Silent = c.Rank() != 0
	if dir := os.Getenv(envFigures); dir != "" && c.Rank() == 0 {
		if err := r.WriteFigures(dir); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// launchLab starts nproc copies of this program running lab with cfg's
// settings and returns rank 0's report.
func launchLab(ctx context.Context, lab string, cfg any, opt Options, nproc int, transport string) (*reports.Report, error) {
	if transport == "mpi" {
		return nil, Usagef("--set transport=mpi runs under mpirun (mpirun -np %d gptlab run %s --set transport=mpi)", nproc, lab)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: find this program to launch it: %w", lab, err)
	}
	figs, err := os.MkdirTemp("", "gptlab-"+lab+"-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lab, err)
	}
	defer os.RemoveAll(figs)
	args := append([]string{"run", lab, "--seed", strconv.FormatInt(opt.Seed, 10), "--format", "json"}, setArgs(cfg)...)
	var out bytes.Buffer
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	fmt.Fprintf(log, "%s: launching %s of %s\n", lab, reports.Count(nproc, "rank"), filepath.Base(self))
	err = parallel.Launch(ctx, parallel.LaunchConfig{
		NProc: nproc, Path: self, Args: args, Env: []string{envFigures + "=" + figs},
		Stdout: &out, Stderr: log, Grace: 3 * time.Second,
		// one line for a failure: the ranks' lines go to a log file the
		// error names (this process prints the lab's own line)
		LogRanks: true, FailPrefix: "gptlab: ",
	})
	var je *parallel.JobError
	var ie *parallel.InterruptError
	switch {
	case errors.As(err, &je) && je.Status == 1 && out.Len() > 0:
		// a check failed on rank 0: its report is still the lab's, and
		// says which check
		os.Remove(je.Log)
	case errors.As(err, &ie):
		os.Remove(ie.Log) // this process says it was interrupted
		return nil, ctx.Err()
	case errors.Is(err, parallel.ErrInterrupted):
		return nil, ctx.Err()
	case err != nil:
		return nil, JobError(err)
	}
	r := &reports.Report{}
	if err := json.Unmarshal(out.Bytes(), r); err != nil {
		return nil, fmt.Errorf("%s: read rank 0's report: %w", lab, err)
	}
	for _, name := range r.Figures {
		b, err := os.ReadFile(filepath.Join(figs, name))
		if err != nil {
			return nil, fmt.Errorf("%s: rank 0's figure: %w", lab, err)
		}
		r.AttachFile(name, b)
	}
	return r, nil
}

// setArgs are --set flags that give a lab config's every setting its
// value in cfg.
func setArgs(cfg any) []string {
	var out []string
	for _, f := range Fields(cfg) {
		var s string
		switch x := Text(f.Value.Interface()).(type) {
		case []string:
			s = strings.Join(x, ",")
		case []int:
			parts := make([]string, len(x))
			for i, v := range x {
				parts[i] = strconv.Itoa(v)
			}
			s = strings.Join(parts, ",")
		case []float64:
			parts := make([]string, len(x))
			for i, v := range x {
				parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
			}
			s = strings.Join(parts, ",")
		case float64:
			s = strconv.FormatFloat(x, 'g', -1, 64)
		default:
			s = fmt.Sprint(x)
		}
		out = append(out, "--set", f.Key+"="+s)
	}
	return out
}
