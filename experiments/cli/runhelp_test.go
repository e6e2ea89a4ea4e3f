package cli

import (
	"strings"
	"testing"
)

// TestRunLabHelp: run LAB --help shows that lab's settings, as gptlab
// help LAB does (it once showed run's generic help); run --help alone
// still shows run's.
func TestRunLabHelp(t *testing.T) {
	for _, args := range [][]string{{"run", "reuse", "--help"}, {"run", "--quick", "reuse", "-h"}} {
		out := mainSays(t, args, "settings of gptlab run reuse", "alignment")
		if want := mainSays(t, []string{"help", "reuse"}); out != want {
			t.Errorf("gptlab %q differs from gptlab help reuse:\n%s\n--- want\n%s", args, out, want)
		}
	}
	if out := mainSays(t, []string{"run", "--help"}, "--quick"); strings.Contains(out, "settings of gptlab run reuse") {
		t.Errorf("run --help shows a lab's settings:\n%s", out)
	}
}
