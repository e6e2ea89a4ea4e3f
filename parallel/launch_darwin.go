package parallel

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts a worker in a process group of its own. macOS has no
// parent-death signal: a worker learns of the launcher's death from its
// connection to it (launcher.go).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// sstop is the p_stat of a stopped process (<sys/proc.h>).
const sstop = 4

// stoppedProcess reports whether pid is stopped (kern.proc.pid's p_stat).
func stoppedProcess(pid int) bool {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	return err == nil && kp.Proc.P_stat == sstop
}
