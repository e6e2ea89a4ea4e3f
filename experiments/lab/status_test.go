package lab

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatus: on a terminal a phase is one line, redrawn in place and
// cleared; elsewhere nothing at all is written.
func TestStatus(t *testing.T) {
	var tty bytes.Buffer
	s := newStatus(&tty, true)
	s.Say("plan: reading %s", "x.csv")
	s.Tick("plan: %d rows", 10) // within 100 ms of the Say: not drawn
	s.Clear()
	if got := tty.String(); got != "\r\033[Kplan: reading x.csv\r\033[K" || strings.Contains(got, "\n") {
		t.Errorf("terminal status = %q, want one line drawn then cleared", got)
	}
	var pipe bytes.Buffer
	p := newStatus(&pipe, false)
	p.Say("plan: reading")
	p.Tick("plan: 10 rows")
	p.Clear()
	if pipe.Len() != 0 {
		t.Errorf("status on a pipe wrote %q, want nothing", pipe.String())
	}
}
