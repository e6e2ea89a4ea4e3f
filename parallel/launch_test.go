package parallel

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"gptlab/internal/platform"
)

// The launcher's exit status is the job's: a worker's own status when it
// exits badly by itself.
func TestLaunchStatus(t *testing.T) {
	res := runJob(t, 2, "exit3", 0)
	var je *JobError
	if !errors.As(res.err, &je) || je.Status != 3 || !strings.Contains(je.Msg, "exited with status 3") {
		t.Fatalf("Launch = %v, want a *JobError with status 3 naming the exit", res.err)
	}
	if res := runJob(t, 2, "collectives", 0, "TEST_TRANSPORT=shm"); res.err != nil {
		t.Fatalf("Launch of a passing job = %v, want nil\n%s", res.err, res.stderr)
	}
}

// An interrupt stops every worker and says so. The workers sleep a
// minute; the launcher should stop them within its grace (half a second
// after the cancel). The limit below is only there to catch a launcher
// that does not stop them at all: it waits for the sleeps to end (a
// minute) or hangs. It is not a speed check, so it is generous enough for
// a loaded machine.
func TestLaunchInterrupt(t *testing.T) {
	const hang = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	err := Launch(ctx, LaunchConfig{NProc: 2, Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{envWorker + "=sleep"}, Grace: 500 * time.Millisecond})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Launch after cancel = %v, want ErrInterrupted", err)
	}
	took := time.Since(t0)
	if took > hang {
		t.Fatalf("interrupted job took %v to stop: the launcher did not stop its workers", took)
	}
	t.Logf("interrupted job stopped after %v", took.Round(time.Millisecond))
}

// A worker started by hand with torchrun's variables joins a launched
// job: here rank 1 of 2, beside a launcher that starts only rank 0.
func TestJoinByHand(t *testing.T) {
	ln := freeAddr(t)
	host, port, _ := strings.Cut(ln, ":")
	wrapper, err := execWrapper()
	if err != nil {
		t.Fatal(err)
	}
	hand := wrapCommand(wrapper, os.Args[0], "-test.run=^$")
	hand.Env = append(os.Environ(), envWorker+"=collectives", "TEST_TRANSPORT=tcp",
		"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR="+host, "MASTER_PORT="+port)
	var handErr bytes.Buffer
	hand.Stderr = &handErr
	if err := hand.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err = Launch(context.Background(), LaunchConfig{NProc: 1, WorldSize: 2, Master: ln, Path: os.Args[0],
		Args: []string{"-test.run=^$"}, Env: []string{envWorker + "=collectives", "TEST_TRANSPORT=tcp"}, Stderr: &stderr})
	herr := hand.Wait()
	if err != nil || herr != nil {
		t.Fatalf("launched rank 0: %v %s; rank 1 by hand: %v %s", err, stderr.String(), herr, handErr.String())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestPrefixWriter(t *testing.T) {
	var b bytes.Buffer
	p := &prefixWriter{prefix: "rank 1: ", w: &b}
	p.Write([]byte("one\ntw"))
	p.Write([]byte("o\nthree"))
	p.flush()
	if want := "rank 1: one\nrank 1: two\nrank 1: three\n"; b.String() != want {
		t.Fatalf("prefixed output %q, want %q", b.String(), want)
	}
}

// The launcher runs every worker through the command GPTLAB_LAUNCH_EXEC
// names (here env, setting a variable the worker checks; under emulation
// the emulator's command stays after it).
func TestLaunchExec(t *testing.T) {
	wrapper := "env WRAPPED=1"
	if cur := os.Getenv(EnvExec); cur != "" {
		wrapper += " " + cur
	}
	t.Setenv(EnvExec, wrapper)
	if res := runJob(t, 2, "wrapped", 0, "TEST_TRANSPORT=tcp"); res.err != nil {
		t.Fatalf("job through %q: %v\n%s", wrapper, res.err, res.stderr)
	}
	t.Setenv(EnvExec, "no-such-command-gptlab")
	if res := runJob(t, 1, "wrapped", 0); res.err == nil || !strings.Contains(res.err.Error(), EnvExec) {
		t.Fatalf("job through a missing command: %v, want an error naming %s", res.err, EnvExec)
	}
}

// CheckTransport refuses an unknown name, and shm exactly where the system
// has no shared-memory transport, wrapping ErrUnsupported; so does Join.
// With platform.SharedMemory off (Windows's value), this system takes the
// same refusal; restored, it offers shm again where it is built.
func TestCheckTransport(t *testing.T) {
	for _, name := range []string{"", "auto", "tcp", "mpi"} {
		if err := CheckTransport(name); err != nil {
			t.Errorf("CheckTransport(%q) = %v, want nil", name, err)
		}
	}
	if err := CheckTransport("udp"); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("CheckTransport(udp) = %v, want an error that is not ErrUnsupported", err)
	}
	check := func(when string) {
		t.Helper()
		err := CheckTransport("shm")
		if shmSupported() && err != nil || !shmSupported() && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: CheckTransport(shm) = %v on %s (shared memory supported: %v)", when, err, runtime.GOOS, shmSupported())
		}
		if !shmSupported() {
			_, err = Join(context.Background(), Env{WorldSize: 2, Master: "127.0.0.1:1"}, Options{Transport: "shm"})
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s: Join over shm on %s = %v, want ErrUnsupported", when, runtime.GOOS, err)
			}
		}
	}
	check("as built")
	if shmSupported() != (runtime.GOOS != "windows") {
		t.Errorf("shared memory supported %v on %s", shmSupported(), runtime.GOOS)
	}
	saved := platform.SharedMemory
	defer func() { platform.SharedMemory = saved }()
	platform.SharedMemory = false
	if shmSupported() {
		t.Fatal("platform.SharedMemory = false leaves shm supported")
	}
	check("Windows's value")
}

// blame follows the verdicts to the cause: rank 0 gave up on rank 2 (not
// started) and closed its connections; rank 1, losing rank 0, blamed it
// first. The launcher names rank 2 and why, not rank 1's consequence
// (issue 17, defect 6).
func TestBlameFollowsTheVerdicts(t *testing.T) {
	wrapper, err := execWrapper() // under emulation, the test binary runs through it
	if err != nil {
		t.Fatal(err)
	}
	cmd := wrapCommand(wrapper, os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	w0 := &worker{rank: 0, cmd: cmd, exited: true, state: cmd.ProcessState,
		verdict: "rank 2 failed: deadline passed: rank(s) 2 did not join within 1s", vRank: 2, vAt: t0.Add(time.Millisecond)}
	w1 := &worker{rank: 1, cmd: cmd, exited: true, state: cmd.ProcessState,
		verdict: "rank 0 failed: connection lost: the process exited or died: rendezvous: EOF", vRank: 0, vAt: t0}
	je := blame([]*worker{w0, w1}, w0)
	if je.Rank != 2 || !strings.Contains(je.Msg, "rank(s) 2 did not join") {
		t.Errorf("blame = rank %d, %q; want rank 2 and the rendezvous's verdict", je.Rank, je.Msg)
	}
	// a chain that loops stops: each blames the other
	w0.verdict, w0.vRank = "rank 1 failed: connection lost", 1
	if je := blame([]*worker{w0, w1}, w0); je.Rank != 0 {
		t.Errorf("blame of a loop = rank %d, %q; want the earliest verdict's rank 0", je.Rank, je.Msg)
	}
}

// TestRankProcs: the CPUs are shared among the ranks, at least one each,
// unless the environment already names GOMAXPROCS.
func TestRankProcs(t *testing.T) {
	cpus := runtime.NumCPU()
	for _, tc := range []struct {
		nproc int
		env   []string
		want  int
	}{
		{1, nil, cpus},
		{2, []string{"PATH=/bin"}, max(1, cpus/2)},
		{cpus + 1, nil, 1},
		{2, []string{"GOMAXPROCS=3"}, 0},
		{2, []string{"GOMAXPROCSX=3"}, max(1, cpus/2)},
	} {
		if got := rankProcs(tc.nproc, tc.env); got != tc.want {
			t.Errorf("rankProcs(%d, %q) = %d, want %d", tc.nproc, tc.env, got, tc.want)
		}
	}
}
