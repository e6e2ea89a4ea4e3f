package lab

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// ProgressBar shows training progress on the log writer. On a terminal it
// redraws one line (step, bar, loss, tokens/s, ETA) at most ten times a
// second; on anything else (a file, a pipe, io.Discard) it prints only a
// line per validation, so logs stay readable.
type ProgressBar struct {
	w      io.Writer
	tty    bool
	total  int
	drawn  time.Time
	active bool // a partial line is on screen
}

func NewProgressBar(w io.Writer, total int) *ProgressBar {
	return &ProgressBar{w: w, tty: isTerminal(w), total: total}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Step records a finished training step.
func (p *ProgressBar) Step(step int, loss float64, tokPerS float64, eta time.Duration) {
	if !p.tty || (time.Since(p.drawn) < 100*time.Millisecond && step < p.total) {
		return
	}
	p.drawn = time.Now()
	const width = 24
	filled := width * step / max(1, p.total)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	fmt.Fprintf(p.w, "\r%*d/%d [%s] loss %.4f  %s tok/s  ETA %s ", len(fmt.Sprint(p.total)), step, p.total, bar, loss, humanRate(tokPerS), eta.Round(time.Second))
	p.active = true
}

// Eval records a validation result.
func (p *ProgressBar) Eval(step int, train, val float64) {
	p.Clear()
	fmt.Fprintf(p.w, "step %d/%d: train loss %.4f, val loss %.4f\n", step, p.total, train, val)
}

// Clear ends a partial line so that other output starts on a fresh one.
func (p *ProgressBar) Clear() {
	if p.active {
		fmt.Fprint(p.w, "\r\033[K")
		p.active = false
	}
}

func humanRate(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1fk", x/1e3)
	}
	return fmt.Sprintf("%.0f", x)
}
