//go:build unix

package parallel

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A worker whose launcher dies exits at once, by the closure of its
// connection to the launcher alone: the launcher here runs with Linux's
// parent-death signal off, as macOS and Windows have none. The worker
// (scenario "pid") would otherwise sleep a minute. The limit is not a
// speed check: it only catches a worker that outlives its launcher.
func TestLauncherDeath(t *testing.T) {
	wrapper, err := execWrapper()
	if err != nil {
		t.Fatal(err)
	}
	l := wrapCommand(wrapper, os.Args[0], "-test.run=^$")
	l.Env = append(os.Environ(), envLauncher+"=pid")
	out, err := l.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	sc := bufio.NewScanner(out)
	for pid == 0 && sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			pid, _ = strconv.Atoi(s)
		}
	}
	if pid == 0 {
		l.Process.Kill()
		l.Wait()
		t.Fatalf("the launched worker did not say its pid (%v)", sc.Err())
	}
	t.Cleanup(func() {
		if processAlive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !processAlive(pid) {
		t.Fatalf("worker %d is not running before its launcher is killed", pid)
	}
	l.Process.Kill()
	l.Wait()
	t0 := time.Now()
	for processAlive(pid) {
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("worker %d still runs %v after its launcher was killed", pid, time.Since(t0).Round(time.Millisecond))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("worker %d exited %v after its launcher was killed", pid, time.Since(t0).Round(time.Millisecond))
}
