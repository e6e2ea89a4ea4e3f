package cli

import (
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

// TestLabHelpFits: every lab's help fits 100 columns (its heading once
// ran to 104), and a list in the settings table breaks between items,
// never inside a number.
func TestLabHelpFits(t *testing.T) {
	for _, l := range Labs() {
		if !l.Built {
			continue
		}
		out := mainSays(t, []string{"help", l.Name}, l.Name)
		if n, line := testutil.WidestLine(out); n > 100 {
			t.Errorf("help %s: a line of %d columns: %q", l.Name, n, line)
		}
		lines := strings.Split(out, "\n")
		for i := 1; i < len(lines); i++ {
			prev, cur := cells(lines[i-1]), cells(lines[i])
			if len(prev) < 2 || len(cur) < 2 || cur[0] != "" { // a continuation row has no key
				continue
			}
			p, c := prev[1], cur[1]
			if p != "" && c != "" && isDigit(p[len(p)-1]) && isDigit(c[0]) {
				t.Errorf("help %s: a number broken across lines: %q / %q", l.Name, p, c)
			}
		}
	}
}

// cells are a table line's cells, trimmed.
func cells(line string) []string {
	parts := strings.Split(line, "│")
	if len(parts) < 3 {
		return nil
	}
	out := make([]string, 0, len(parts)-2)
	for _, p := range parts[1 : len(parts)-1] {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
