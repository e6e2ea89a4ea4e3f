package cli

import (
	"bytes"
	"strings"
	"testing"

	"gptlab/internal/platform"
)

// Windows has no shared-memory transport: a multi-process lab asked for
// it refuses with exit 2 and one line naming it (parallel.ErrUnsupported
// through CheckTransport), before any process starts. Here that path runs
// on this system through platform.SharedMemory set to Windows's value. The
// negative control: with this system's value, the same command gets past
// the transport (data-parallel's next check refuses ranks=1 instead), and
// with shm off the tcp transport is still accepted.
func TestWindowsRefusesShm(t *testing.T) {
	saved := platform.SharedMemory
	defer func() { platform.SharedMemory = saved }()
	for _, tc := range []struct {
		name   string
		shm    bool
		args   []string
		want   string // in the one line
		reject string // not in it
	}{
		{"data-parallel, no shm", false, []string{"run", "data-parallel", "--quick", "--set", "transport=shm"},
			"transport shm (shared memory): not supported on", "ranks="},
		{"tensor-parallel, no shm", false, []string{"run", "tensor-parallel", "--quick", "--set", "transport=shm"},
			"transport shm (shared memory): not supported on", ""},
		{"data-parallel, no shm, bad ranks", false, []string{"run", "data-parallel", "--quick", "--set", "transport=shm", "--set", "ranks=1"},
			"not supported on", "ranks="},
		{"control: shm offered", true, []string{"run", "data-parallel", "--quick", "--set", "transport=shm", "--set", "ranks=1"},
			"--set ranks=1", "not supported"},
		{"control: tcp without shm", false, []string{"run", "data-parallel", "--quick", "--set", "transport=tcp", "--set", "ranks=1"},
			"--set ranks=1", "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shm && !saved {
				t.Skip("this system has no shared-memory transport to offer")
			}
			platform.SharedMemory = tc.shm
			var out, errb bytes.Buffer
			if got := Main(tc.args, &out, &errb); got != 2 {
				t.Fatalf("Main(%q) = %d, want 2; stderr: %s", tc.args, got, errb.String())
			}
			msg := strings.TrimSpace(errb.String())
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "gptlab: ") {
				t.Errorf("Main(%q) stderr is not one gptlab: line: %q", tc.args, msg)
			}
			if !strings.Contains(msg, tc.want) || tc.reject != "" && strings.Contains(msg, tc.reject) {
				t.Errorf("Main(%q) stderr = %q, want %q in it and not %q", tc.args, msg, tc.want, tc.reject)
			}
			if out.Len() != 0 {
				t.Errorf("Main(%q) wrote a report on a refusal:\n%s", tc.args, out.String())
			}
		})
	}
}
