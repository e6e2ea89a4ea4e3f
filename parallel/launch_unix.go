//go:build unix

package parallel

import (
	"os"
	"syscall"
)

// signalWorker sends sig to the worker's process group (each worker leads
// one: sysProcAttr sets Setpgid), so what the worker started gets it too.
func signalWorker(p *os.Process, sig syscall.Signal) {
	syscall.Kill(-p.Pid, sig)
}
