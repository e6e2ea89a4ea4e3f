package parallel

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// Every collective on both transports (TCP on both engines: the polling
// one of Unix, the blocking one of Windows; shm in /dev/shm and, as on
// macOS, in the temporary directory), 2 and 3 ranks, as
// real processes, against the single-process math, with the byte counts
// against their models (checkCollectives). Frames of 64 KiB make the
// larger sizes multi-frame, so the pipelined paths run.
func TestCollectives(t *testing.T) {
	for _, tr := range []string{"tcp", "tcp-blocking", "shm", "shm-tmpdir"} {
		for _, p := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/p=%d", tr, p), func(t *testing.T) {
				if strings.HasPrefix(tr, "shm") && !shmSupported() {
					t.Skipf("no shared-memory transport on %s", runtime.GOOS)
				}
				res := runJob(t, p, "collectives", 0, "TEST_TRANSPORT="+tr, "TEST_CHUNK=65536")
				if res.err != nil {
					t.Fatalf("job: %v\n%s", res.err, res.stderr)
				}
			})
		}
	}
}
