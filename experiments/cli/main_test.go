package cli

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gptlab/internal/testutil"
	"gptlab/models"
	"gptlab/parallel"
)

// TestMain lets the test binary be gptlab: run with GPTLAB_TEST_MAIN=1 it
// runs Main on its arguments, so the signal tests drive a real process
// without building one.
func TestMain(m *testing.M) {
	if os.Getenv("GPTLAB_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	// A lab that launches copies of this program (a multi-process lab run
	// on its own) starts this test binary: it must act as gptlab.
	os.Setenv("GPTLAB_TEST_MAIN", "1")
	os.Exit(m.Run())
}

// interruptGptlab starts the test binary as gptlab with args, waits for a
// line of its stderr matching ready, sends sig, and returns the exit
// status and the last line of stderr (progress may come before it).
func interruptGptlab(t *testing.T, ready *regexp.Regexp, sig os.Signal, args ...string) (int, string) {
	t.Helper()
	cmd, err := parallel.Command(os.Args[0], args...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "GPTLAB_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // never wait forever
	defer timer.Stop()
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if ready.MatchString(sc.Text()) {
			break
		}
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if len(rest) == 0 {
		t.Fatalf("gptlab %q said nothing after %v; before it: %q", args, sig, seen)
	}
	return cmd.ProcessState.ExitCode(), rest[len(rest)-1]
}

// TestInterruptSavesAndSaysSo: Ctrl-C and SIGTERM stop gpt train at the
// next step with exit 130 and one plain line: the checkpoint it saved (and
// it loads, at that step), or that nothing was saved without --out.
func TestInterruptSavesAndSaysSo(t *testing.T) {
	train := []string{"gpt", "train", "--set", "iters=1000000", "--set", "warmup=10", "--set", "eval-every=20",
		"--set", "eval-batches=1", "--set", "sample-chars=0"}
	ready := regexp.MustCompile(`^step 40/`) // the second validation
	saved := regexp.MustCompile(`^gptlab: interrupted at step (\d+); checkpoint saved to (\S+) `)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			code, msg := interruptGptlab(t, ready, sig, append(train, "--out", out)...)
			m := saved.FindStringSubmatch(msg)
			if code != 130 || m == nil || strings.Contains(msg, "context") {
				t.Fatalf("gpt train --out, %v: exit %d, stderr %q; want 130 and one line saying where the checkpoint is", sig, code, msg)
			}
			step, _ := strconv.Atoi(m[1])
			ck, err := models.LoadCheckpoint(m[2])
			if err != nil || m[2] != filepath.Join(out, "model.safetensors") || ck.Step != step || step < 40 {
				t.Errorf("checkpoint %s: %v, step %v; want step %d (>= 40) in %s", m[2], err, ck, step, out)
			}
		})
	}
	code, msg := interruptGptlab(t, ready, syscall.SIGTERM, train...)
	if code != 130 || !regexp.MustCompile(`^gptlab: interrupted at step \d+; nothing saved: no --out given$`).MatchString(msg) {
		t.Errorf("gpt train without --out, SIGTERM: exit %d, stderr %q; want 130 and nothing saved: no --out given", code, msg)
	}
	if testutil.Trimmed() {
		t.Log("run gpt, Ctrl-C: not run under -short when emulated (its setup outlasts the minute allowed; gpt train above took the same signal path)")
		return
	}
	code, msg = interruptGptlab(t, regexp.MustCompile(`^step 20/`), os.Interrupt, append([]string{"run", "gpt"}, train[2:]...)...)
	if code != 130 || msg != "gptlab: interrupted during lab gpt; nothing saved: no --out given" {
		t.Errorf("run gpt, Ctrl-C: exit %d, stderr %q; want 130 and nothing saved", code, msg)
	}
}

// TestInterruptExitGate: the gate interrupted during a lab says which
// labs' reports --out holds, and they are complete.
func TestInterruptExitGate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the gpt and reuse labs (--quick): a few seconds")
	}
	out := t.TempDir()
	code, msg := interruptGptlab(t, regexp.MustCompile(`^exit-gate: running arena`), os.Interrupt, "exit-gate", "--quick", "--out", out)
	if want := "gptlab: interrupted during lab arena; the reports of gpt, reuse are saved under " + out; code != 130 || msg != want {
		t.Fatalf("exit-gate interrupted: exit %d, stderr %q; want 130 and %q", code, msg, want)
	}
	for _, lab := range []string{"gpt", "reuse"} {
		if _, err := os.Stat(filepath.Join(out, lab, "report.json")); err != nil {
			t.Errorf("the %s report said saved is not there: %v", lab, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "arena")); err == nil {
		t.Errorf("the interrupted arena lab left a directory")
	}
}
