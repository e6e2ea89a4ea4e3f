package parallel

import (
	"bytes"
	"fmt"
	"os"
)

// pdeathsigOff turns the parent-death signal off, so that a test sees the
// launcher's connection alone make a worker exit.
func pdeathsigOff() { pdeathsig = 0 }

// processAlive reports whether pid runs (a zombie has exited).
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
