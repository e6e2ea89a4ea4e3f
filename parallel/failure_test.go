package parallel

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"gptlab/internal/emulated"
)

// The failure policy, on real processes: a rank killed mid-collective, a
// malformed frame, a stopped rank. Every survivor must fail with one line
// naming the rank and the cause, and the launcher must name it too, all
// within the deadline.
func TestFailures(t *testing.T) {
	deadline := 2 * time.Second
	if emulated.Is() { // the ranks start emulated: on a loaded machine joining takes over 2 s
		deadline = 6 * time.Second
	}
	for _, tc := range []struct {
		scenario, transport string
		p                   int
		cause               string // in every survivor's line and the launcher's
		how                 string // the launcher's word on the failing rank's exit
		status              int    // JobError.Status: the rank's own, -1 if it did not exit by itself
		within              time.Duration
	}{
		{"kill", "tcp", 3, "rank 1 failed: connection lost", "killed by signal 9", -1, deadline},
		{"kill", "shm", 3, "rank 1 failed: connection lost", "killed by signal 9", -1, deadline},
		{"rejoin-kill", "tcp", 2, "rank 1 failed: connection lost", "killed by signal 9", -1, deadline},
		{"corrupt", "tcp", 2, "rank 1 failed: malformed frame: checksum", "exited with status 1", 1, deadline},
		{"corrupt", "shm", 2, "rank 1 failed: malformed frame: length", "exited with status 1", 1, deadline},
		{"hang", "shm", 3, "rank 1 failed: deadline passed", "stopped by the launcher", -1, 2 * deadline},
		{"hang", "tcp", 2, "rank 1 failed: deadline passed", "stopped by the launcher", -1, 2 * deadline},
		{"kill", "tcp-blocking", 3, "rank 1 failed: connection lost", "killed by signal 9", -1, deadline},
		{"corrupt", "tcp-blocking", 2, "rank 1 failed: malformed frame: checksum", "exited with status 1", 1, deadline},
		{"hang", "tcp-blocking", 2, "rank 1 failed: deadline passed", "stopped by the launcher", -1, 2 * deadline},
		{"kill", "shm-tmpdir", 3, "rank 1 failed: connection lost", "killed by signal 9", -1, deadline},
		{"corrupt", "shm-tmpdir", 2, "rank 1 failed: malformed frame: length", "exited with status 1", 1, deadline},
	} {
		t.Run(fmt.Sprintf("%s/%s/p=%d", tc.scenario, tc.transport, tc.p), func(t *testing.T) {
			if strings.HasPrefix(tc.transport, "shm") && !shmSupported() {
				t.Skipf("no shared-memory transport on %s", runtime.GOOS)
			}
			if tc.scenario != "corrupt" && runtime.GOOS == "windows" {
				t.Skip("Windows has no signals to kill or stop a process with")
			}
			res := runJob(t, tc.p, tc.scenario, deadline, "TEST_TRANSPORT="+tc.transport)
			var je *JobError
			if !errors.As(res.err, &je) {
				t.Fatalf("job error = %v, want a *JobError\n%s", res.err, res.stderr)
			}
			if je.Rank != 1 || !strings.Contains(je.Msg, tc.cause) || !strings.Contains(je.Msg, tc.how) || je.Status != tc.status {
				t.Errorf("launcher: rank %d, status %d, %q; want rank 1, status %d, mentioning %q and %q",
					je.Rank, je.Status, je.Msg, tc.status, tc.cause, tc.how)
			}
			// One line from each survivor (a rank that sent a malformed
			// frame is alive: it fails too), naming the rank and the cause.
			survivors := tc.p - 1
			if tc.scenario == "corrupt" {
				survivors = tc.p
			}
			failed := lines(res.stderr, "worker:")
			if len(failed) != survivors {
				t.Fatalf("%d survivors' lines, want %d:\n%s", len(failed), survivors, res.stderr)
			}
			for _, l := range failed {
				if !strings.Contains(l, tc.cause) {
					t.Errorf("survivor's line %q does not say %q", l, tc.cause)
				}
			}
			if t0 := eventTime(res.stderr, "myself at"); t0 > 0 {
				for _, l := range failed {
					took := time.Duration(eventTime(l, "(at") - t0)
					t.Logf("detected after %v: %s", took.Round(time.Millisecond), l)
					if took <= 0 || took > tc.within {
						t.Errorf("a survivor failed %v after the fault, want within %v", took, tc.within)
					}
				}
			}
			t.Logf("launcher: %s (job took %v)", je.Msg, res.elapsed.Round(time.Millisecond))
		})
	}
}

var stampRE = regexp.MustCompile(`(\d{15,})`)

// eventTime finds the Unix-nanosecond stamp printed after marker.
func eventTime(s, marker string) int64 {
	i := strings.Index(s, marker)
	if i < 0 {
		return 0
	}
	m := stampRE.FindString(s[i:])
	n, _ := strconv.ParseInt(m, 10, 64)
	return n
}
