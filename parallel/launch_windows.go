package parallel

import (
	"os"
	"syscall"

	"golang.org/x/sys/windows"
)

// sysProcAttr starts a worker as the leader of a new process group, so
// that a Ctrl-C at the console reaches the launcher alone (which then
// stops the workers), as Setpgid does on Unix. Windows has no
// parent-death signal: a worker learns of the launcher's death from its
// connection to it (launcher.go).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: windows.CREATE_NEW_PROCESS_GROUP}
}

// stoppedProcess: Windows processes are not stopped by signals.
func stoppedProcess(int) bool { return false }

// signalWorker stops one worker: SIGKILL terminates the process (Windows
// has no process-group kill; each worker is stopped by itself, and a
// process the worker started is not); SIGINT and SIGTERM send Ctrl-Break
// to its process group, which Go delivers as os.Interrupt. When the
// worker has no console to receive it, the SIGKILL that follows after the
// launcher's grace stops it.
func signalWorker(p *os.Process, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		p.Kill()
		return
	}
	windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, uint32(p.Pid))
}
