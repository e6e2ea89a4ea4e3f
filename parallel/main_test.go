package parallel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The tests that need several ranks start real processes: the test binary
// runs itself with PARALLEL_TEST_WORKER naming a scenario (workers.go's
// table), and TestMain runs that scenario instead of the tests.

const envWorker = "PARALLEL_TEST_WORKER"

// envLauncher makes the test binary a launcher of one worker running the
// scenario it names (TestLauncherDeath), with the parent-death signal off.
const envLauncher = "PARALLEL_TEST_LAUNCHER"

func TestMain(m *testing.M) {
	if name := os.Getenv(envWorker); name != "" {
		os.Exit(runWorker(name))
	}
	if name := os.Getenv(envLauncher); name != "" {
		os.Exit(runLauncher(name))
	}
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests run once the tests are done (the MPI build finalises MPI).
var afterTests []func()

// jobResult is what a test job left behind.
type jobResult struct {
	err     error
	stderr  string
	elapsed time.Duration
}

// runJob launches n workers of a scenario with extra environment.
// TEST_TRANSPORT=tcp-blocking is TCP on the blocking engine (Windows');
// shm-tmpdir is shm with its files in os.TempDir (macOS's place for them).
func runJob(t *testing.T, n int, scenario string, deadline time.Duration, env ...string) jobResult {
	t.Helper()
	for i, kv := range env {
		switch kv {
		case "TEST_TRANSPORT=tcp-blocking":
			env = append(env[:i:i], append([]string{"TEST_TRANSPORT=tcp", "TEST_TCP_ENGINE=blocking"}, env[i+1:]...)...)
		case "TEST_TRANSPORT=shm-tmpdir":
			// as on macOS: no /dev/shm, so the rings are files in os.TempDir
			env = append(env[:i:i], append([]string{"TEST_TRANSPORT=shm", "TEST_DEV_SHM=/nonexistent/dev/shm"}, env[i+1:]...)...)
		}
	}
	var stderr bytes.Buffer
	t0 := time.Now()
	err := Launch(context.Background(), LaunchConfig{
		NProc: n, Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env:      append([]string{envWorker + "=" + scenario}, env...),
		Deadline: deadline, Stdout: os.Stdout, Stderr: &stderr, Grace: 500 * time.Millisecond,
	})
	res := jobResult{err: err, stderr: stderr.String(), elapsed: time.Since(t0)}
	for _, dir := range []string{shmDir(), os.TempDir()} {
		if leftover, _ := filepath.Glob(filepath.Join(dir, "gptlab-*.ring")); len(leftover) > 0 {
			t.Errorf("files left in %s: %v", dir, leftover)
		}
	}
	return res
}

// runLauncher launches one worker of a scenario and waits for it.
func runLauncher(scenario string) int {
	pdeathsigOff()
	err := Launch(context.Background(), LaunchConfig{NProc: 1, Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{envLauncher + "=", envWorker + "=" + scenario}, Stderr: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		return 1
	}
	return 0
}

// runWorker runs one rank of a scenario and returns its exit status.
func runWorker(name string) int {
	w, ok := workers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "no worker scenario %q\n", name)
		return 3
	}
	env, err := FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	// The runtime's network poller opens its descriptors once, on first
	// use: start it before counting.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	useTCPEngine(os.Getenv("TEST_TCP_ENGINE"))
	useShmDir(os.Getenv("TEST_DEV_SHM"))
	goroutines, fds := runtime.NumGoroutine(), openFDs()
	c, err := Join(context.Background(), env, Options{Transport: os.Getenv("TEST_TRANSPORT"), ChunkBytes: atoiEnv("TEST_CHUNK")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: join:", err)
		return 1
	}
	if c.Transport() == "shm" && os.Getenv("TEST_DEV_SHM") != "" && filepath.Dir(ShmPath(env.Job, env.Rank)) != os.TempDir() {
		fmt.Fprintf(os.Stderr, "worker: ring %s, want it in %s\n", ShmPath(env.Job, env.Rank), os.TempDir())
		return 1
	}
	if c.Transport() == "shm" {
		if _, err := os.Stat(ShmPath(env.Job, env.Rank)); !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "worker: %s still linked after setup (%v)\n", ShmPath(env.Job, env.Rank), err)
			return 1
		}
	}
	if err := w(c); err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v (at %d)\n", err, time.Now().UnixNano())
		c.Close()
		return 1
	}
	cerr := c.Close()
	if cerr != nil {
		fmt.Fprintln(os.Stderr, "worker: close:", cerr)
		return 1
	}
	// No goroutine or descriptor outlives the communicator.
	for i := 0; ; i++ {
		g, f := runtime.NumGoroutine(), openFDs()
		if g <= goroutines && f <= fds {
			break
		}
		if i == 100 {
			buf := make([]byte, 1<<16)
			fmt.Fprintf(os.Stderr, "worker: leak: %d goroutines (want %d), %d fds (want %d)\n%s\n",
				g, goroutines, f, fds, buf[:runtime.Stack(buf, true)])
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// openFDs counts this process's open descriptors (0 where the system
// does not list them: Windows).
func openFDs() int {
	dir := "/proc/self/fd"
	if runtime.GOOS == "darwin" {
		dir = "/dev/fd"
	}
	ents, _ := os.ReadDir(dir)
	return len(ents)
}

func atoiEnv(name string) int {
	var n int
	fmt.Sscan(os.Getenv(name), &n)
	return n
}

// lines returns the non-empty lines of s that contain sub.
func lines(s, sub string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" && strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
