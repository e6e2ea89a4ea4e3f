package lab

import (
	"fmt"
	"io"
	"time"
)

// Status is a sign of life for a long phase that has no steps to count
// (reading a million-row file, planning it): on a terminal, one line that
// says what is going on, redrawn at most ten times a second and cleared
// when the phase ends; on anything else (a pipe, a file, io.Discard),
// nothing, so captured output stays the report alone.
type Status struct {
	w      io.Writer
	tty    bool
	drawn  time.Time
	active bool
}

// NewStatus writes status lines to w when w is a terminal.
func NewStatus(w io.Writer) *Status { return newStatus(w, isTerminal(w)) }

func newStatus(w io.Writer, tty bool) *Status { return &Status{w: w, tty: tty} }

// Say shows what is going on now (a new phase: drawn at once).
func (s *Status) Say(format string, args ...any) {
	if !s.tty {
		return
	}
	s.drawn = time.Now()
	fmt.Fprintf(s.w, "\r\033[K"+format, args...)
	s.active = true
}

// Tick updates the line within a phase, at most ten times a second.
func (s *Status) Tick(format string, args ...any) {
	if !s.tty || time.Since(s.drawn) < 100*time.Millisecond {
		return
	}
	s.Say(format, args...)
}

// Clear removes the line, so that what follows starts on a clean one.
func (s *Status) Clear() {
	if s.active {
		fmt.Fprint(s.w, "\r\033[K")
		s.active = false
	}
}
