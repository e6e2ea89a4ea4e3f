// Package planner owns buffer lifetimes and their placement in one arena:
// liveness intervals, placement algorithms (independent, best-fit free
// list, greedy-by-size and a search toward the lower bound), in-place and
// donation legality, and two independent verifications of every plan (a
// sweep for overlaps and a byte-pattern simulation). It does not run
// models; lifetimes from a graph and the arena executor build on it.
package planner

import "fmt"

// Buffer is one block of storage to place: Size bytes, live over the
// half-open interval [Start, End) of schedule steps. A temporary written at
// step f and last read at step l (the chapter's inclusive [f, l]) is the
// Buffer [f, l+1).
type Buffer struct {
	ID    string
	Start int64 // first step at which it is live
	End   int64 // one past the last step at which it is live
	Size  int64 // bytes
}

// Overlaps reports whether two buffers are live at a common step.
func (a Buffer) Overlaps(b Buffer) bool { return a.Start < b.End && b.Start < a.End }

// Validate reports a buffer that cannot be placed.
func (a Buffer) Validate() error {
	switch {
	case a.Size <= 0:
		return fmt.Errorf("buffer %q: size %d must be positive", a.ID, a.Size)
	case a.End <= a.Start:
		return fmt.Errorf("buffer %q: lifetime [%d, %d) is empty or reversed", a.ID, a.Start, a.End)
	}
	return nil
}
