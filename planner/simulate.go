package planner

import "fmt"

// MaxSimulateUnits is the largest arena, in units (see Simulate), that
// Simulate will execute; a larger plan is refused with an error rather than
// allocating without bound.
const MaxSimulateUnits = 1 << 28

// Simulate executes the plan on a model of the arena and reports the first
// buffer whose bytes were overwritten while it was live.
//
// The arena holds, for every byte, the tag of the buffer that last wrote
// it: a pattern unique to each buffer (its index plus one, 32 bits per
// byte, so no two buffers can ever write the same pattern and a single
// shared byte is caught). The schedule is walked in time order; at each
// step, first every buffer whose lifetime ends there is read back and must
// still hold its own pattern in every byte, then every buffer that starts
// there writes its pattern over [offset, offset+size).
//
// Why checking each buffer once, at its end, catches every overlap: let A
// and B be live at a common step and share a byte, and let A be the one
// written first (earlier start, or the same start and earlier in the walk).
// Then B is written while A is live (B starts before A ends), so the shared
// byte holds B's tag from then on unless A writes again, and A writes only
// once. A is read back at its end, after B's write, and finds B's tag.
// Conversely, if no two live buffers share a byte, every writer of A's
// bytes after A's write starts at or after A's end, which is after A's
// read-back, so a correct plan always passes.
//
// The arena is modelled in units of g bytes, g the greatest common divisor
// of every offset, size and the peak. Every write covers whole units, so
// the g bytes of a unit always hold the same tag and one tag per unit is
// exactly as strong as one per byte; it lets 64 MiB buffers simulate in a
// handful of units.
//
// Cost: O(n log n) for the order plus two passes over every buffer's units.
func Simulate(p Problem, pl Plan) error {
	if err := checkShape(p, pl); err != nil {
		return err
	}
	n := len(p.Buffers)
	g := pl.Peak
	for i, b := range p.Buffers {
		g = simGCD(simGCD(g, b.Size), pl.Offsets[i])
	}
	g = max(g, 1)
	if pl.Peak/g > MaxSimulateUnits {
		return fmt.Errorf("simulate: arena of %d units of %d bytes exceeds the simulator's %d", pl.Peak/g, g, MaxSimulateUnits)
	}
	arena := make([]uint32, pl.Peak/g)
	starts, ends := sortedByTime(p.Buffers)
	readBack := func(i int) error {
		b, off := p.Buffers[i], pl.Offsets[i]
		want := uint32(i + 1)
		for k, tag := range arena[off/g : (off+b.Size)/g] {
			if tag != want {
				w := p.Buffers[tag-1]
				return fmt.Errorf("%w: simulation: buffer %q (bytes [%d, %d), steps [%d, %d)) lost byte %d to buffer %q written at step %d, before its last read",
					ErrBadPlan, b.ID, off, off+b.Size, b.Start, b.End, off+int64(k)*g, w.ID, w.Start)
			}
		}
		return nil
	}
	j := 0
	for _, i := range starts {
		for j < n && p.Buffers[ends[j]].End <= p.Buffers[i].Start {
			if err := readBack(ends[j]); err != nil {
				return err
			}
			j++
		}
		off := pl.Offsets[i]
		fillTag(arena[off/g:(off+p.Buffers[i].Size)/g], uint32(i+1))
	}
	for ; j < n; j++ {
		if err := readBack(ends[j]); err != nil {
			return err
		}
	}
	return nil
}

// fillTag writes tag into every element of s.
func fillTag(s []uint32, tag uint32) {
	for k := range s {
		s[k] = tag
	}
}

// simGCD is the greatest common divisor of non-negative a and b.
func simGCD(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
