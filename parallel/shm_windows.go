package parallel

import (
	"fmt"
	"os"
)

// shmBuilt: Windows has no shared-memory transport here (the rings are
// files mapped with mmap); Join refuses it with ErrUnsupported and "auto"
// picks TCP.
const shmBuilt = false

// shmDir is where a ring's file would be: the temporary directory (only
// the launcher's sweep of leftovers looks there on Windows).
func shmDir() string { return os.TempDir() }

// hostID names the host.
func hostID() string {
	h, _ := os.Hostname()
	return h
}

func mapRing(path string, create bool) (*ring, error) {
	return nil, fmt.Errorf("%s: shared memory: %w", path, ErrUnsupported)
}

func (r *ring) unmap() {}
