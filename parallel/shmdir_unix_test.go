//go:build unix

package parallel

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// useShmDir makes this process put its rings where shmDirIn(devShm) says
// (a worker of the shm-tmpdir jobs); "" leaves shmDir as it is.
func useShmDir(devShm string) {
	if devShm != "" {
		shmDir = sync.OnceValue(func() string { return shmDirIn(devShm) })
	}
}

// The rings live in /dev/shm where it is a directory, else (macOS) in the
// temporary directory; a ring's path is in that directory.
func TestShmDir(t *testing.T) {
	dir := t.TempDir()
	if got := shmDirIn(dir); got != dir {
		t.Errorf("shmDirIn(%s), a directory = %s, want it", dir, got)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), file} {
		if got := shmDirIn(p); got != os.TempDir() {
			t.Errorf("shmDirIn(%s) = %s, want the temporary directory %s", p, got, os.TempDir())
		}
	}
	if p := ShmPath("job", 2); filepath.Dir(p) != shmDir() || !strings.HasSuffix(p, "gptlab-job-2.ring") {
		t.Errorf("ShmPath = %s, want gptlab-job-2.ring in %s", p, shmDir())
	}
}
