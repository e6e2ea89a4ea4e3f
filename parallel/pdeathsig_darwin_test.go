package parallel

import "syscall"

// pdeathsigOff: macOS has no parent-death signal.
func pdeathsigOff() {}

// processAlive reports whether pid runs.
func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }
