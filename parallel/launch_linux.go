package parallel

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

// pdeathsig is the kernel's parent-death signal for the workers: a belt on
// top of the launcher's connection, whose closure is what makes a worker
// exit everywhere. Tests turn it off to see the connection do it alone.
var pdeathsig = syscall.SIGKILL

// sysProcAttr puts a worker in a process group of its own and has the
// kernel kill it if the launcher's thread dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: pdeathsig}
}

// stoppedProcess reports whether pid is stopped (state T in /proc).
func stoppedProcess(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, so look after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}
