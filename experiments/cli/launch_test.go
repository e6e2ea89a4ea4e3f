package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"gptlab/experiments/lab/labtest"
	"gptlab/reports"
)

// envAsMain makes the test binary act as gptlab (main_test.go's TestMain):
// `gptlab launch` starts os.Executable(), which in a test is this binary.
const envAsMain = "GPTLAB_TEST_MAIN"

func TestLaunchUsage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"no nproc", []string{"launch", "--", "list"}, 2, "--nproc 0"},
		{"bad nproc", []string{"launch", "--nproc", "x", "--", "list"}, 2, `--nproc "x": not an integer`},
		{"nothing to run", []string{"launch", "--nproc", "2"}, 2, "nothing to run"},
		{"bad world", []string{"launch", "--nproc", "2", "--world-size", "1", "--", "list"}, 2, "--world-size 1"},
		{"bench not launched", []string{"bench", "allreduce"}, 2, "RANK is not set"},
		{"bench bad transport", []string{"bench", "allreduce", "--set", "transport=ib"}, 2, "transport=ib"},
		{"bench bad size", []string{"bench", "allreduce", "--set", "min-bytes=6"}, 2, "min-bytes=6"},
		{"launch help", []string{"launch", "--help"}, 0, ""},
		{"bench help", []string{"bench", "allreduce", "-h"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := Main(tc.args, &stdout, &stderr); got != tc.status || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("Main(%q) = %d, stderr %q; want %d mentioning %q", tc.args, got, stderr.String(), tc.status, tc.stderr)
			}
			if strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
				t.Errorf("want one line on stderr, got %q", stderr.String())
			}
		})
	}
}

// gptlab launch --nproc 2 -- bench allreduce, on real processes: rank 0's
// report is the job's output, and its checks (exact sums, bytes against
// the ring model) hold on both transports.
func TestLaunchBenchAllreduce(t *testing.T) {
	t.Setenv(envAsMain, "1")
	var stdout, stderr bytes.Buffer
	args := []string{"launch", "--nproc", "2", "--", "bench", "allreduce",
		"--set", "max-bytes=16384", "--set", "mpi=off", "--format", "json"}
	if got := Main(args, &stdout, &stderr); got != 0 {
		t.Fatalf("Main(%q) = %d, stderr:\n%s", args, got, stderr.String())
	}
	var r reports.Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("rank 0's output is not one JSON report: %v\n%s", err, stdout.String())
	}
	v, ok := r.Metrics.Get("allreduce_4kib_us")
	if us, _ := v.(float64); !ok || us <= 0 {
		t.Errorf("allreduce_4kib_us = %v, want a positive time", v)
	}
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
	}
	labtest.ChecksHold(t, &r, "")
	for _, want := range []string{"shm: sums exact", "tcp: sums exact", "shm: bytes sent = 2(p-1)/p·N", "tcp: bytes sent = 2(p-1)/p·N"} {
		if !names[want] {
			t.Errorf("no check %q in %v", want, names)
		}
	}
}

// The launcher's exit status is the job's: a bad argument on every rank
// is exit 2, with one line naming the rank, its cause and the log of the
// ranks' lines.
func TestLaunchStatusIsTheJobs(t *testing.T) {
	t.Setenv(envAsMain, "1")
	var stdout, stderr bytes.Buffer
	if got := Main([]string{"launch", "--nproc", "2", "--", "run", "nope"}, &stdout, &stderr); got != 2 {
		t.Fatalf("launch of a bad command = %d, want 2; stderr:\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), `unknown lab "nope"`) || !strings.Contains(stderr.String(), "exited with status 2") {
		t.Errorf("stderr %q: want the rank's cause and the launcher's verdict", stderr.String())
	}
	if m := logFileRE.FindStringSubmatch(stderr.String()); m != nil {
		os.Remove(m[1])
	}
}
