package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutInTheWay: a directory where a report's file goes is refused
// with exit 2 and one line naming it, and the refused run writes
// nothing into --out (it once wrote report.md and the figures, then
// failed on report.json). report.md and report.json are checked before
// the lab runs; a figure's name, known when the lab is done, before
// anything is written.
func TestOutInTheWay(t *testing.T) {
	for _, blocked := range []string{"report.json", "report.md", "timeline-naive.svg"} {
		t.Run(blocked, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, blocked), 0o755); err != nil {
				t.Fatal(err)
			}
			code, _, errs := runMain("run", "reuse", "--quick", "--out", dir)
			if code != 2 || !strings.Contains(errs, blocked) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("run reuse --out with %s a directory: exit %d, stderr %q; want 2 and one line naming it", blocked, code, errs)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 1 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("the refused run left %v in --out, want only the %s it found", names, blocked)
			}
		})
	}
}
