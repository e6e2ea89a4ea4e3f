package parallel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LaunchConfig describes a job for Launch.
type LaunchConfig struct {
	NProc     int    // workers to start here: ranks 0..NProc-1
	WorldSize int    // ranks in the job; 0 means NProc. Ranks NProc.. join by hand from elsewhere
	Master    string // host:port of rank 0's rendezvous; "": 127.0.0.1 and a free port
	// Deadline is passed to the workers as GPTLAB_DEADLINE (0: theirs).
	Deadline time.Duration
	Path     string   // the program every worker runs
	Args     []string // its arguments
	Env      []string // added to this process's environment
	// Rank 0's output goes to Stdout and Stderr as it is. The other ranks'
	// standard output is discarded (rank 0 prints the report) and each line
	// of their standard error is prefixed with "rank N: ".
	Stdout, Stderr io.Writer
	// Grace is how long, after a worker fails, the others get to exit by
	// themselves before they are stopped (SIGTERM, then SIGKILL 2 s later).
	// 0 means 3 s.
	Grace time.Duration
	// LogRanks keeps a failed job to one line: every rank's standard error
	// (rank 0's too) goes to a log file, each line prefixed "rank N: ", and
	// the other ranks' lines go there alone. The file is removed when the
	// job succeeds (or when no rank wrote a line); otherwise the error
	// names it (JobError.Log, InterruptError.Log).
	LogRanks bool
	// FailPrefix begins the line a failing rank ends with (gptlab's
	// "gptlab: "). With LogRanks, rank 0's lines that begin with it are
	// held back until its next line or its exit; when it exits badly the
	// last one is not written to Stderr: the error carries it instead,
	// as the culprit's own cause.
	FailPrefix string
}

// JobError is a job that failed: which rank, and why.
type JobError struct {
	Rank int
	// Status is the failing rank's own exit status, or -1 when it did not
	// exit by itself (killed, stopped by the launcher, or started elsewhere).
	Status int
	Msg    string
	// Log is the file holding every rank's standard error (LogRanks), ""
	// if none was kept. Msg names it.
	Log string
}

func (e *JobError) Error() string { return e.Msg }

// ErrInterrupted: the launcher was interrupted and stopped every worker.
// Launch returns it as an *InterruptError.
var ErrInterrupted = errors.New("interrupted")

// InterruptError is an interrupted job: errors.Is(err, ErrInterrupted).
type InterruptError struct {
	Said string // rank 0's last line (FailPrefix stripped), held back from Stderr; "" if none
	Log  string // the ranks' log file (LogRanks), "" if none was kept
}

func (e *InterruptError) Error() string     { return ErrInterrupted.Error() }
func (e *InterruptError) Is(err error) bool { return err == ErrInterrupted }

type worker struct {
	rank     int
	cmd      *exec.Cmd
	startedC chan struct{} // closed once cmd is set (or the launch gave up)
	conn     bool          // its connection to the launcher is attributed
	state    *os.ProcessState
	exited   bool
	stopped  bool        // stopped by the launcher
	out      *rankWriter // its standard error, with LogRanks
	verdict  string
	vAt      time.Time
	vRank    int
}

// Launch starts cfg.NProc workers with torchrun's environment (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), each in a process
// group of its own (see sysProcAttr), and waits for them. A worker exits
// at once if the launcher dies: its connection to the launcher closes
// (launcher.go; on Linux the kernel's parent-death signal kills it too).
// When a worker fails, the others are given cfg.Grace to notice (they fail
// too, naming the rank), then stopped; the error names the rank at fault:
// the one the workers' verdict names (each writes it on a status pipe), or
// else the first to exit badly. Cancelling ctx (an interrupt) sends SIGINT
// to every worker, SIGKILL after the grace, and returns ErrInterrupted.
// Unless the environment or cfg.Env sets GOMAXPROCS, each worker gets
// GOMAXPROCS = the CPUs over NProc (at least 1), as torchrun sets
// OMP_NUM_THREADS=1: a worker's kernels split their work across its
// GOMAXPROCS, and their idle helpers poll for a while before they sleep,
// so ranks that each took every core would take turns on them.
func Launch(ctx context.Context, cfg LaunchConfig) error {
	if cfg.NProc < 1 {
		return fmt.Errorf("launch: --nproc %d: want at least 1", cfg.NProc)
	}
	world := cfg.WorldSize
	if world == 0 {
		world = cfg.NProc
	}
	if world < cfg.NProc {
		return fmt.Errorf("launch: world size %d is smaller than --nproc %d", world, cfg.NProc)
	}
	master := cfg.Master
	var held *os.File // rank 0's rendezvous listener, handed down (EnvMasterFD)
	if master == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("launch: finding a free port: %w", err)
		}
		master = ln.Addr().String()
		if runtime.GOOS != "windows" { // no ExtraFiles there: rank 0 binds the port again
			held, err = ln.(*net.TCPListener).File()
		}
		ln.Close()
		if err != nil {
			return fmt.Errorf("launch: the rendezvous listener: %w", err)
		}
		defer func() {
			if held != nil {
				held.Close()
			}
		}()
	}
	host, port, err := net.SplitHostPort(master)
	if err != nil {
		return fmt.Errorf("launch: --master %q: want HOST:PORT", master)
	}
	grace := cfg.Grace
	if grace == 0 {
		grace = 3 * time.Second
	}
	var jb [6]byte
	rand.Read(jb[:])
	job := hex.EncodeToString(jb[:])
	defer sweepShm(job)

	stderr := &lockedWriter{w: cfg.Stderr}
	var log *rankLog
	if cfg.LogRanks {
		if log, err = newRankLog(job); err != nil {
			return err
		}
	}
	workers := make([]*worker, cfg.NProc)
	for r := range workers {
		workers[r] = &worker{rank: r, startedC: make(chan struct{})}
	}
	exits := make(chan int, cfg.NProc)
	var mu sync.Mutex // guards the workers' verdicts and commands
	ll, err := listenForWorkers(job, workers, &mu)
	if err != nil {
		return err
	}
	defer ll.close()
	wrapper, err := execWrapper()
	if err != nil {
		return err
	}
	var started []*worker
	abandon := func() {
		for _, w := range workers[len(started):] {
			close(w.startedC)
		}
		stopAll(started, syscall.SIGKILL)
		for range started {
			<-exits
		}
	}
	for r := range cfg.NProc {
		w := workers[r]
		cmd := wrapCommand(wrapper, cfg.Path, cfg.Args...)
		cmd.Env = append(append(os.Environ(), cfg.Env...),
			EnvRank+"="+strconv.Itoa(r), EnvWorldSize+"="+strconv.Itoa(world), EnvLocalRank+"="+strconv.Itoa(r),
			EnvMasterAddr+"="+host, EnvMasterPort+"="+port, EnvJob+"="+job, EnvLauncher+"="+ll.addr())
		if cfg.Deadline > 0 {
			cmd.Env = append(cmd.Env, EnvDeadline+"="+cfg.Deadline.String())
		}
		cmd.Env = append(cmd.Env, EnvMasterFD+"=") // none inherited
		if r == 0 && held != nil {
			cmd.ExtraFiles = []*os.File{held}
			cmd.Env = append(cmd.Env, EnvMasterFD+"=3") // ExtraFiles[0]
		}
		if procs := rankProcs(cfg.NProc, cmd.Env); procs > 0 {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(procs))
		}
		switch {
		case log != nil:
			w.out = &rankWriter{prefix: fmt.Sprintf("rank %d: ", r), log: log, hold: cfg.FailPrefix}
			if r == 0 {
				w.out.live = stderr
				cmd.Stdout = cfg.Stdout
			}
			cmd.Stderr = w.out
		case r == 0:
			cmd.Stdout, cmd.Stderr = cfg.Stdout, stderr
		default:
			cmd.Stderr = &prefixWriter{prefix: fmt.Sprintf("rank %d: ", r), w: stderr}
		}
		cmd.SysProcAttr = sysProcAttr()
		mu.Lock()
		err := cmd.Start()
		if err == nil {
			w.cmd = cmd
		}
		mu.Unlock()
		if cmd.ExtraFiles != nil { // rank 0 holds the rendezvous listener now
			held.Close()
			held = nil
		}
		if err != nil {
			abandon()
			log.end(false)
			if errors.Is(err, syscall.ENOEXEC) && wrapper == nil {
				return fmt.Errorf("launch: rank %d: %w (a binary of another architecture? under user-mode emulation, set %s=qemu-%s-static)", r, err, EnvExec, qemuArch())
			}
			return fmt.Errorf("launch: rank %d: %w", r, err)
		}
		close(w.startedC)
		started = append(started, w)
		go func() {
			cmd.Wait()
			switch p := cmd.Stderr.(type) {
			case *prefixWriter:
				p.flush()
			case *rankWriter:
				p.finish(cmd.ProcessState.Success())
			}
			exits <- r
		}()
	}

	var first *worker // the first to exit badly
	var graceC, killC <-chan time.Time
	interrupted := false
	done := ctx.Done()
	for left := cfg.NProc; left > 0; {
		select {
		case r := <-exits:
			left--
			w := workers[r]
			w.exited, w.state = true, w.cmd.ProcessState
			if !w.state.Success() && first == nil && !interrupted {
				first = w
				graceC = time.After(grace)
			}
		case <-done:
			done = nil
			interrupted = true
			stopAll(workers, syscall.SIGINT)
			killC = time.After(grace)
		case <-graceC:
			graceC = nil
			for _, w := range workers {
				if !w.exited {
					w.stopped = true
				}
			}
			stopAll(workers, syscall.SIGTERM) // SIGKILL for a stopped process: it cannot act on SIGTERM
			killC = time.After(2 * time.Second)
		case <-killC:
			killC = nil
			stopAll(workers, syscall.SIGKILL)
		}
	}
	ll.drain()
	if !interrupted && first == nil {
		log.end(false)
		return nil
	}
	kept := log.end(true)
	if interrupted {
		ie := &InterruptError{Log: kept}
		if workers[0].out != nil {
			ie.Said = workers[0].out.said
		}
		return ie
	}
	je := blame(workers, first)
	if kept != "" {
		je.Log = kept
		je.Msg += "; every rank's lines are in " + kept
	}
	return je
}

// blame names the rank at fault and the launcher's exit status.
func blame(workers []*worker, first *worker) *JobError {
	var v *worker // the earliest verdict
	for _, w := range workers {
		if w.verdict != "" && (v == nil || w.vAt.Before(v.vAt)) {
			v = w
		}
	}
	// A verdict naming a rank of ours that gave a verdict of its own is a
	// consequence (rank 0 gave up on a missing rank and closed its
	// connections: the others lost it): the named rank's verdict is the
	// cause. Follow the chain, at most once per rank.
	for range workers {
		if v == nil || v.vRank < 0 || v.vRank >= len(workers) || v.vRank == v.rank {
			break
		}
		n := workers[v.vRank]
		if n.verdict == "" || n.vRank == v.rank {
			break
		}
		v = n
	}
	culprit, msg := first, ""
	if v != nil {
		msg = v.verdict
		if v.vRank >= 0 && v.vRank < len(workers) {
			culprit = workers[v.vRank]
		} else {
			culprit = nil // a rank started elsewhere
		}
	}
	status := -1
	if culprit == nil {
		return &JobError{Rank: v.vRank, Status: status, Msg: msg}
	}
	how := describeExit(culprit)
	if msg == "" {
		msg = fmt.Sprintf("rank %d %s", culprit.rank, how)
		if culprit.out != nil && culprit.out.said != "" {
			msg += ": " + culprit.out.said // its own cause
		}
	} else {
		msg = fmt.Sprintf("%s (rank %d %s)", msg, culprit.rank, how)
	}
	if ws, ok := culprit.state.Sys().(syscall.WaitStatus); ok && ws.Exited() && !culprit.stopped {
		status = ws.ExitStatus()
	}
	return &JobError{Rank: culprit.rank, Status: status, Msg: msg}
}

func describeExit(w *worker) string {
	ws, _ := w.state.Sys().(syscall.WaitStatus)
	switch {
	case w.stopped && (ws.Signaled() || runtime.GOOS == "windows"): // Windows has no signals: Kill is exit status 1
		return fmt.Sprintf("was stopped by the launcher (%v)", ws.Signal())
	case ws.Signaled():
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case ws.Exited():
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	}
	return w.state.String()
}

// stopAll sends sig to every worker still running (to its process group
// where the system has them; see signalWorker).
func stopAll(workers []*worker, sig syscall.Signal) {
	for _, w := range workers {
		if w != nil && !w.exited && w.cmd != nil && w.cmd.Process != nil {
			s := sig
			if sig == syscall.SIGTERM && stoppedProcess(w.cmd.Process.Pid) {
				s = syscall.SIGKILL // a stopped process cannot act on SIGTERM
			}
			signalWorker(w.cmd.Process, s)
		}
	}
}

// sweepShm removes any ring file of the job still in the shared-memory
// directory (workers unlink theirs during setup; this covers a worker
// killed inside it).
func sweepShm(job string) {
	files, _ := filepath.Glob(filepath.Join(shmDir(), "gptlab-"+job+"-*"))
	for _, f := range files {
		os.Remove(f)
	}
}

// lockedWriter serialises the writes of several workers' streams.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}

// prefixWriter writes whole lines, each after a prefix.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

// flush writes what is left of an unterminated last line.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.w.Write(append(append([]byte(p.prefix), p.buf...), '\n'))
		p.buf = nil
	}
}

// rankProcs is the GOMAXPROCS each of nproc workers gets: the CPUs over
// nproc, at least 1; or 0 (none given) when env already sets it.
func rankProcs(nproc int, env []string) int {
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOMAXPROCS=") {
			return 0
		}
	}
	return max(1, runtime.NumCPU()/nproc)
}
