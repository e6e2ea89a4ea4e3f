// Package recompute owns gradient checkpointing of a chain: a network
// seen as links between points where one tensor carries everything
// forward (a transformer's residual stream between half-blocks). The
// backward of link i needs what its forward computed; a schedule decides
// which forwards keep that, which keep only their output as a checkpoint,
// and which links run their forward again (recompute) before their
// backward. The package holds the memory and time model of such schedules
// and a simulator of it (Simulate), the dynamic program that finds the
// fastest schedule within a memory budget (Optimal; Revolve-style when
// recomputation may nest, as in Beaumont et al.'s optimal checkpointing of
// heterogeneous chains), an exhaustive search of the same space
// (Exhaustive), and the single-level schedules of Chen et al. (Chen: a
// subset of checkpoints, each stretch recomputed once). It knows no model:
// the sizes and times of the links are measured by the caller, and a
// schedule found here is checked by planning the real step.
package recompute

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Link is one link of a chain, with its measured sizes and times.
type Link struct {
	Name  string
	Out   int64 // bytes of its output: the next link's input, or its gradient
	Saved int64 // bytes its forward keeps for its backward (besides its input)
	TempF int64 // bytes live only while its forward runs (beyond its input and output)
	TempB int64 // bytes live only while its backward runs (beyond saved, gradients)
	Grads int64 // bytes its backward leaves for good (its parameters' gradients)
	Fwd   float64
	Bwd   float64
	// A partial save, when PartSaved > 0: the forward keeps PartSaved bytes
	// and the backward first recomputes the rest, in PartCost more time and
	// with PartTemp more bytes live (Megatron's selective recomputation of
	// attention's core).
	PartSaved int64
	PartCost  float64
	PartTemp  int64
}

// Move is one step of a chain schedule: the forward of a link (Part: with
// the partial save) or its backward.
type Move struct {
	Link     int
	Backward bool
	Part     bool
}

// String is "F3", "F3p" or "B3".
func (m Move) String() string {
	switch {
	case m.Backward:
		return fmt.Sprintf("B%d", m.Link)
	case m.Part:
		return fmt.Sprintf("F%dp", m.Link)
	}
	return fmt.Sprintf("F%d", m.Link)
}

// Moves is a schedule of a whole chain.
type Moves []Move

// String lists the moves.
func (ms Moves) String() string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.String()
	}
	return strings.Join(s, " ")
}

// ErrSchedule marks a schedule that does not run the chain's backward.
var ErrSchedule = errors.New("bad chain schedule")

// ErrBudget marks a memory budget no schedule fits.
var ErrBudget = errors.New("no schedule fits the budget")

// copyOf is one forward of a link in a simulation.
type copyOf struct {
	input int  // the forward copy of the link before that made its input (-1: the chain's input)
	part  bool // partial save
}

// Simulate runs moves on the chain's model and returns the time they take
// and the most bytes live at once. The rules are those of a graph run in
// schedule order: a forward of link i reads the output of the latest
// forward of link i-1 (the chain's input, of in bytes, for link 0: always
// there and not counted); the backward of link i reads the latest forward
// of i (its saved bytes, its input) and the gradient of i's output (from
// the backward of i+1; the last link's is not counted), and writes the
// gradient of its input (the chain input's, for link 0) and its Grads,
// which stay to the end. A forward's peak
// is its input, its output and TempF (which includes what it may keep);
// what it keeps stays after it only if a backward reads it. Every value lives from the move that makes it to
// its last reader; what no later move reads dies with the move that made
// it.
func Simulate(links []Link, in int64, moves Moves) (time float64, peak int64, err error) {
	n := len(links)
	if err := checkMoves(n, moves); err != nil {
		return 0, 0, err
	}
	// Which forward copy each backward reads, and each copy's last reader.
	var copies []copyOf
	copyLink := []int{}
	latest := make([]int, n)
	for i := range latest {
		latest[i] = -1
	}
	readBy := make([]int, len(moves)) // for a forward move: the copy it makes
	lastRead := []int{}               // per copy: the last move reading its output or saved bytes
	savedUntil := []int{}             // per copy: the backward reading its saved bytes, or -1
	for at, m := range moves {
		if m.Backward {
			c := latest[m.Link]
			savedUntil[c] = at
			if in := copies[c].input; in >= 0 {
				lastRead[in] = max(lastRead[in], at)
			}
			continue
		}
		in := -1
		if m.Link > 0 {
			in = latest[m.Link-1]
			lastRead[in] = max(lastRead[in], at)
		}
		copies = append(copies, copyOf{input: in, part: m.Part})
		copyLink = append(copyLink, m.Link)
		lastRead = append(lastRead, at)
		savedUntil = append(savedUntil, -1)
		latest[m.Link] = len(copies) - 1
		readBy[at] = len(copies) - 1
	}
	saved := func(c int) int64 {
		l := links[copyLink[c]]
		if copies[c].part {
			return l.PartSaved
		}
		return l.Saved
	}
	// Walk the moves with the live set.
	var live int64
	outLive := make([]bool, len(copies))
	savedLive := make([]bool, len(copies))
	var dy int64 // the gradient flowing back (the last link's is not counted)
	for at, m := range moves {
		var during int64
		if !m.Backward {
			c := readBy[at]
			l := links[m.Link]
			time += l.Fwd
			during = live + l.Out + l.TempF
			live += l.Out
			outLive[c] = true
			if savedUntil[c] > at {
				live += saved(c)
				savedLive[c] = true
			}
		} else {
			c := latest[m.Link]
			l := links[m.Link]
			time += l.Bwd
			extra := int64(0)
			if copies[c].part {
				time += l.PartCost
				extra = l.PartTemp
			}
			dx := in
			if m.Link > 0 {
				dx = links[m.Link-1].Out
			}
			during = live + l.TempB + extra + dx + l.Grads
			if savedLive[c] {
				live -= saved(c)
				savedLive[c] = false
			}
			live += dx - dy + l.Grads
			dy = dx
		}
		peak = max(peak, during)
		for c := range copies { // outputs read for the last time by this move die
			if outLive[c] && lastRead[c] <= at {
				live -= links[copyLink[c]].Out
				outLive[c] = false
			}
		}
	}
	return time, peak, nil
}

// checkMoves reports moves that do not run the chain's backward: every
// link's backward once, last link first, each after a forward of its link
// and with the forward of the link before it having run.
func checkMoves(n int, moves Moves) error {
	fwd := make([]bool, n)
	next := n - 1
	for at, m := range moves {
		switch {
		case m.Link < 0 || m.Link >= n:
			return fmt.Errorf("%w: move %d (%v): link outside [0, %d)", ErrSchedule, at, m, n)
		case m.Backward && m.Link != next:
			return fmt.Errorf("%w: move %d (%v): backward of link %d due", ErrSchedule, at, m, next)
		case m.Backward && !fwd[m.Link]:
			return fmt.Errorf("%w: move %d (%v): no forward of the link before it", ErrSchedule, at, m)
		case !m.Backward && m.Link > 0 && !fwd[m.Link-1]:
			return fmt.Errorf("%w: move %d (%v): no forward of link %d before it", ErrSchedule, at, m, m.Link-1)
		case !m.Backward && m.Link > next:
			return fmt.Errorf("%w: move %d (%v): a forward after its link's backward", ErrSchedule, at, m)
		}
		if m.Backward {
			next--
		} else {
			fwd[m.Link] = true
		}
	}
	if next != -1 {
		return fmt.Errorf("%w: the moves end before the backward of link %d", ErrSchedule, next)
	}
	return nil
}

// Schedule is a chain schedule found by a search, with its time and
// peak in the model (Simulate gives the same).
type Schedule struct {
	Moves Moves
	Time  float64
	Peak  int64
}

// searcher holds a search over chain schedules.
type searcher struct {
	links  []Link
	in     int64               // bytes of the chain's input (its gradient is link 0's backward's output)
	nested bool                // recomputed stretches may checkpoint again
	q      int64               // bytes per memory unit of the budget
	memo   map[[4]int64]result // (s, t, m, space) -> best, nil for an exhaustive search
	sizes  func(int64) int64   // bytes -> units (rounded up)
	grads  []int64             // grads[i]: units of the gradients of links 0..i-1
}

// result is the best schedule of a subchain in the model.
type result struct {
	time  float64
	moves Moves
	ok    bool
}

// The spaces of a subproblem: top (checkpoints allowed) and keepAll (a
// stretch being recomputed keeps everything: Chen's single level).
const (
	spaceTop     = 0
	spaceKeepAll = 1
)

// Optimal is the fastest schedule of the chain whose peak in
// the model fits budget, by dynamic programming over subchains (s, t) and
// the memory left, in units of quantum bytes (sizes round up to whole
// units, so the schedule found always fits; a quantum of 1 is exact).
// With nested, a stretch being recomputed may itself leave checkpoints
// and recompute again (Revolve); without, the schedules are Chen et al.'s:
// a set of checkpoints kept by the first forward, each stretch but the
// last recomputed once keeping everything.
func Optimal(links []Link, in, budget, quantum int64, nested bool) (Schedule, error) {
	if quantum < 1 {
		return Schedule{}, fmt.Errorf("%w: quantum %d bytes, want >= 1", ErrSchedule, quantum)
	}
	s := &searcher{links: links, in: in, nested: nested, q: quantum, memo: map[[4]int64]result{}}
	return s.solve(budget)
}

// Exhaustive finds the same optimum as Optimal
// by trying every schedule of its space, in exact bytes, without
// remembering subproblems: a reference for the dynamic program, feasible
// for chains of a dozen links.
func Exhaustive(links []Link, in, budget int64, nested bool) (Schedule, error) {
	s := &searcher{links: links, in: in, nested: nested, q: 1}
	return s.solve(budget)
}

func (s *searcher) solve(budget int64) (Schedule, error) {
	if len(s.links) == 0 {
		return Schedule{}, fmt.Errorf("%w: an empty chain", ErrSchedule)
	}
	s.sizes = func(b int64) int64 { return (b + s.q - 1) / s.q }
	s.grads = make([]int64, len(s.links)+1)
	for i, l := range s.links {
		s.grads[i+1] = s.grads[i] + s.sizes(l.Grads)
	}
	r := s.best(0, len(s.links)-1, budget/s.q, spaceTop)
	if !r.ok {
		return Schedule{}, fmt.Errorf("%w: %d bytes", ErrBudget, budget)
	}
	t, peak, err := Simulate(s.links, s.in, r.moves)
	if err != nil {
		return Schedule{}, err
	}
	// The search's own accounting must be the simulator's.
	if peak > budget || math.Abs(t-r.time) > 1e-9*math.Max(1, t) {
		return Schedule{}, fmt.Errorf("recompute: internal error: %v found at time %v within %d bytes, simulated %v and %d bytes", r.moves, r.time, budget, t, peak)
	}
	return Schedule{Moves: r.moves, Time: t, Peak: peak}, nil
}

// best is the fastest way to run the backward of links s..t in m units,
// given that the input of s is live (counted by the caller, as are the
// gradients of the links after t) and the gradient of t's output is live
// and counted in m; it ends with the gradient of s's input and the
// gradients of s..t live in m. In space keepAll only forwards that keep
// everything are allowed.
func (s *searcher) best(lo, hi int, m int64, space int) result {
	key := [4]int64{int64(lo), int64(hi), m, int64(space)}
	if s.memo != nil {
		if r, ok := s.memo[key]; ok {
			return r
		}
	}
	r := s.search(lo, hi, m, space)
	if s.memo != nil {
		s.memo[key] = r
	}
	return r
}

func (s *searcher) search(lo, hi int, m int64, space int) result {
	u := s.sizes
	var dyIn int64 // the gradient of hi's output, live on entry
	if hi+1 < len(s.links) {
		dyIn = u(s.links[hi].Out)
	}
	bestR := result{time: math.Inf(1)}
	consider := func(time float64, parts ...Moves) {
		if time < bestR.time {
			var all Moves
			for _, ms := range parts {
				all = append(all, ms...)
			}
			bestR = result{time: time, moves: all, ok: true}
		}
	}
	sub := spaceTop // where lo+1..hi goes when lo keeps everything
	if space == spaceKeepAll || !s.nested {
		sub = spaceKeepAll
	}
	if space == spaceKeepAll || s.nested {
		s.keep(lo, hi, m, dyIn, sub, consider)
	} else {
		// Chen's first forward: everything from here on kept, or a checkpoint
		if r := s.best(lo, hi, m, spaceKeepAll); r.ok {
			consider(r.time, r.moves)
		}
	}
	if space == spaceTop {
		s.checkpoint(lo, hi, m, dyIn, consider)
	}
	return bestR
}

// keep tries the schedules where lo's forward keeps its activations (in
// full or in part): lo's forward, then lo+1..hi on its output (in space
// sub), then lo's backward.
func (s *searcher) keep(lo, hi int, m, dyIn int64, sub int, consider func(float64, ...Moves)) {
	u, l := s.sizes, s.links[lo]
	dx := u(s.in)
	if lo > 0 {
		dx = u(s.links[lo-1].Out)
	}
	for _, part := range []bool{false, true} {
		if part && l.PartSaved == 0 {
			continue
		}
		sv, cost, extra := u(l.Saved), 0.0, int64(0)
		if part {
			sv, cost, extra = u(l.PartSaved), l.PartCost, u(l.PartTemp)
		}
		fwd, bwd := Move{Link: lo, Part: part}, Move{Link: lo, Backward: true}
		if dyIn+u(l.Out)+u(l.TempF) > m {
			continue // its forward does not fit
		}
		g := u(l.Grads)
		if lo == hi {
			if dyIn+sv+u(l.TempB)+extra+dx+g <= m {
				consider(l.Fwd+l.Bwd+cost, Moves{fwd, bwd})
			}
			continue
		}
		// lo's backward, with lo's output gradient and the later links' gradients live
		if sv+u(l.Out)+u(l.TempB)+extra+dx+g+s.grads[hi+1]-s.grads[lo+1] > m {
			continue
		}
		if r := s.best(lo+1, hi, m-sv-u(l.Out), sub); r.ok {
			consider(l.Fwd+r.time+l.Bwd+cost, Moves{fwd}, r.moves, Moves{bwd})
		}
	}
}

// checkpoint tries the schedules with a checkpoint at k: forwards lo..k-1
// keep nothing but k-1's output, then k..hi runs on it, then lo..k-1
// again from lo's input (keeping everything, without nesting).
func (s *searcher) checkpoint(lo, hi int, m, dyIn int64, consider func(float64, ...Moves)) {
	u := s.sizes
	left := spaceTop
	if !s.nested {
		left = spaceKeepAll
	}
	fwd := 0.0
	var moves Moves
	for k := lo + 1; k <= hi; k++ {
		j := k - 1 // the forward just added
		lj := s.links[j]
		var in int64 // j's input, live while it runs (lo's is the caller's)
		if j > lo {
			in = u(s.links[j-1].Out)
		}
		if dyIn+in+u(lj.Out)+u(lj.TempF) > m {
			return // this forward, and so every later checkpoint, does not fit
		}
		fwd += lj.Fwd
		moves = append(moves, Move{Link: j})
		right := s.best(k, hi, m-u(lj.Out), spaceTop)
		if !right.ok {
			continue
		}
		if l := s.best(lo, k-1, m-(s.grads[hi+1]-s.grads[k]), left); l.ok {
			consider(fwd+right.time+l.time, append(Moves(nil), moves...), right.moves, l.moves)
		}
	}
}

// Chen is the single-level schedule of the checkpoints in keep (links
// whose input the first forward keeps; link 0's input, the chain's, is
// always there): the first forward keeps everything of the last stretch,
// and each earlier stretch is recomputed, keeping everything, just before
// its backward. part gives each link's save.
func Chen(n int, keep []int, part []bool) Moves {
	starts := []int{0}
	for _, k := range keep {
		if k > starts[len(starts)-1] && k < n {
			starts = append(starts, k)
		}
	}
	pt := func(i int) bool { return part != nil && part[i] }
	var ms Moves
	for i := range n {
		ms = append(ms, Move{Link: i, Part: pt(i)})
	}
	end := n
	for k := len(starts) - 1; k >= 0; k-- {
		if end != n {
			for i := starts[k]; i < end; i++ {
				ms = append(ms, Move{Link: i, Part: pt(i)})
			}
		}
		for i := end - 1; i >= starts[k]; i-- {
			ms = append(ms, Move{Link: i, Backward: true})
		}
		end = starts[k]
	}
	return ms
}

// BestSubset is the fastest of Chen's single-level schedules (every subset
// of checkpoints, each simulated) whose peak fits budget, and false when
// none fits: the brute force the single-level dynamic program must equal.
// It tries 2^(n-1) subsets.
func BestSubset(links []Link, in, budget int64) (float64, bool) {
	n := len(links)
	best, ok := math.Inf(1), false
	for mask := 0; mask < 1<<(n-1); mask++ {
		var keep []int
		for k := 1; k < n; k++ {
			if mask&(1<<(k-1)) != 0 {
				keep = append(keep, k)
			}
		}
		if t, peak, err := Simulate(links, in, Chen(n, keep, nil)); err == nil && peak <= budget && t < best {
			best, ok = t, true
		}
	}
	return best, ok
}

// RandomChain is n links of unequal sizes and times drawn from r (each
// forward's TempF covers what it keeps); with part, every other link has
// a partial save. The searches are checked on such chains.
func RandomChain(r *rand.Rand, n int, part bool) []Link {
	links := make([]Link, n)
	for i := range links {
		l := Link{Out: 4 + r.Int64N(8), Saved: 5 + r.Int64N(30), TempB: r.Int64N(10), Grads: r.Int64N(5),
			Fwd: 1 + float64(r.IntN(9)), Bwd: 2 + float64(r.IntN(9))}
		l.TempF = l.Saved + r.Int64N(6)
		if part && i%2 == 1 {
			l.PartSaved = 1 + r.Int64N(l.Saved)
			l.PartCost = 0.5 + float64(r.IntN(4))
			l.PartTemp = r.Int64N(l.Saved - l.PartSaved + 1)
		}
		links[i] = l
	}
	return links
}
