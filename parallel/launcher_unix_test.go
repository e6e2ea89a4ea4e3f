//go:build unix

package parallel

import (
	"bufio"
	"net"
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

// TestRendezvousListenerHandedDown: rank 0 listens on the descriptor the
// launcher hands down (EnvMasterFD) at the port the launcher chose, which
// stays bound in between: binding it anew, as rank 0 did before, fails
// while the descriptor holds it (the negative control: the race a
// concurrent process once won, "address already in use"). A descriptor
// listening elsewhere, or no number, is refused.
func TestRendezvousListenerHandedDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := ln.Addr().String()
	ln.Close() // the launcher's own listener; f keeps the port
	if again, err := net.Listen("tcp", addr); err == nil {
		again.Close()
		t.Fatalf("binding %s again succeeded while a descriptor holds it", addr)
	}
	dup := func() string { // rendezvousListener closes the descriptor it is given
		d, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(d)
	}
	if _, err := rendezvousListener("127.0.0.1:1", dup()); err == nil || !strings.Contains(err.Error(), "listens at "+addr) {
		t.Errorf("a listener at %s taken for 127.0.0.1:1: %v", addr, err)
	}
	if _, err := rendezvousListener(addr, "x"); err == nil {
		t.Errorf("descriptor %q accepted", "x")
	}
	rl, err := rendezvousListener(addr, dup())
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := rl.Accept()
	if err != nil {
		t.Fatalf("the listener handed down accepts nothing: %v", err)
	}
	a.Close()
}
