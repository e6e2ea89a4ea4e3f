//go:build unix

package parallel

import (
	"os"
	"syscall"
)

// sigStop stops a process (the hang scenario).
const sigStop = syscall.SIGSTOP

// signalSelf sends this process sig.
func signalSelf(sig syscall.Signal) { syscall.Kill(os.Getpid(), sig) }

// useTCPEngine makes the links run the blocking engine for "blocking",
// the polling one otherwise.
func useTCPEngine(name string) { blockingTCP = name == "blocking" }
