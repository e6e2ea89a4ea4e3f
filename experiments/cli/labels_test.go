package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabelsReadRight: an unknown flag is named as it was typed (-x was
// once reported as --x), a help whose text gives its default says it once
// (launch's "(default N) (default 0)"), and a count of one is singular.
func TestLabelsReadRight(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{{"-x", "unknown flag -x "}, {"--sed", "unknown flag --sed "}, {"--sed=3", "unknown flag --sed "}} {
		code, _, errs := runMain("run", "test-probe", tc.flag)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("run test-probe %s: exit %d, stderr %q; want 2 and %q", tc.flag, code, errs, tc.want)
		}
	}
	for _, name := range []string{"launch", "run", "plan", "gpt train"} {
		out := mainSays(t, []string{"help", name})
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("help %s: %q says its default twice", name, line)
			}
		}
	}
	if out := mainSays(t, []string{"plan", "../../planner/testdata/example.csv"}); strings.Contains(out, " 1 buffers") {
		t.Errorf("plan says %q", out)
	}
	if code, out, _ := runMain("run", "test-probe"); code != 0 || !strings.Contains(out, "the check passed") || strings.Contains(out, "all 1 checks") {
		t.Errorf("run test-probe (one check): exit %d, output ends %q; want 'the check passed'", code, out[max(0, len(out)-80):])
	}
}

// TestBatchPathOnce: a malformed --batch file is named once in the one
// line (it once read "--batch X: X: malformed").
func TestBatchPathOnce(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "batch.safetensors")
	if err := os.WriteFile(bad, []byte("garbage!"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runMain("gpt", "grads", "--model", goldenDir+"/model.safetensors", "--batch", bad,
		"--out", filepath.Join(t.TempDir(), "o.safetensors"))
	if code != 2 || strings.Count(errs, bad) != 1 {
		t.Errorf("gpt grads --batch (malformed): exit %d, stderr %q; want 2 and the path named once", code, errs)
	}
}

// TestPassingDetailsRead: a passing check's detail does not open with
// "0 of …": the checks table cuts details short, and "0 of 11 requests
// judged…" read as a failure.
func TestPassingDetailsRead(t *testing.T) {
	for _, r := range quickGateReport(t).Reports {
		for _, c := range r.Checks {
			if c.Pass && strings.HasPrefix(c.Detail, "0 of ") {
				t.Errorf("%s: check %q passes with a detail that opens like a failure: %q", r.Lab, c.Name, c.Detail)
			}
		}
	}
}
