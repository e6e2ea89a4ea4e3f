package cli

import (
	"context"
	"io"
	"strings"
	"testing"
)

// runCmd runs the command of that name (for example "gpt grads") with
// args and returns its error, not an exit status.
func runCmd(name string, args ...string) error {
	return execute(context.Background(), commands[name], args, io.Discard, io.Discard)
}

// mainSays runs the command line, which must exit 0 and print every one
// of words on stdout; it returns stdout.
func mainSays(t *testing.T, args []string, words ...string) string {
	t.Helper()
	code, out, errs := runMain(args...)
	if code != 0 {
		t.Fatalf("Main(%q) = %d, stderr %q; want 0", args, code, errs)
	}
	for _, w := range words {
		if !strings.Contains(out, w) {
			t.Errorf("Main(%q) output lacks %q:\n%s", args, w, out)
		}
	}
	return out
}
