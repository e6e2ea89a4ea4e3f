package parallel

import (
	"os"
	"syscall"
)

// sigStop: Windows cannot stop a process (the hang scenario is skipped).
const sigStop = syscall.Signal(0)

// signalSelf ends this process for SIGKILL; Windows has no other signal
// to send it.
func signalSelf(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p, _ := os.FindProcess(os.Getpid())
		p.Kill()
	}
}

// pdeathsigOff: Windows has no parent-death signal.
func pdeathsigOff() {}

// useShmDir: Windows has no rings.
func useShmDir(string) {}

// useTCPEngine: Windows always runs the blocking engine.
func useTCPEngine(string) {}
