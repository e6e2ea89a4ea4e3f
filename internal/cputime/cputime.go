// Package cputime reads the CPU time the process has used, every thread,
// user and system, where the operating system says it. It owns that one
// reading; what a lab makes of it (a speed target decided on the CPU a
// run used rather than the wall time it waited for) is the lab's.
//
// On a machine shared with other work, a run's wall time includes the
// time it waited for a core; its CPU time does not. So a target on how
// fast some code runs is steadier on CPU time, which a busy neighbour
// moves only through the caches and the memory it shares.
package cputime

import "time"

// Process returns the CPU time the process has used so far, and false
// where this platform gives none.
func Process() (time.Duration, bool) { return process() }
