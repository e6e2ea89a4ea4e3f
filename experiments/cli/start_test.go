package cli

import (
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

// TestNoArgumentsStarts: gptlab with no arguments is a short start on
// stdout and exit 0, as go and git do (it once printed the whole usage to
// stderr and exited 2); every command it suggests exists.
func TestNoArgumentsStarts(t *testing.T) {
	code, out, errs := runMain()
	if code != 0 || errs != "" {
		t.Fatalf("gptlab: exit %d, stderr %q; want 0 and nothing on stderr", code, errs)
	}
	if n := strings.Count(out, "\n"); n > 12 {
		t.Errorf("gptlab prints %d lines, want a short start (at most 12)", n)
	}
	if n, line := testutil.WidestLine(out); n > 100 {
		t.Errorf("a line of %d columns: %q", n, line)
	}
	for _, want := range []string{"gptlab exit-gate --quick", "gptlab run reuse --quick", "gptlab help"} {
		if !strings.Contains(out, want) {
			t.Errorf("gptlab does not suggest %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "gptlab" || !strings.HasPrefix(line, "  ") {
			continue
		}
		if commands[f[1]] == nil {
			t.Errorf("gptlab suggests %q, which is no command", f[1])
		}
	}
}
