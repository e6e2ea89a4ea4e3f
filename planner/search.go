package planner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the entry of the "search" planner: a greedy start, then a
// depth-first search (search_dfs.go) that tightens the peak toward the
// lower bound, the most bytes live at one instant.

// Defaults of SearchOptions.
const (
	// DefaultSearchNodes is the node budget of one Search: a few seconds
	// of one core at most. Minimising, it brings each of MiniMalloc's 11
	// challenge instances under their capacity, nine to the lower bound
	// (the costliest of those, E, takes about 201,000 nodes).
	DefaultSearchNodes = 250_000
	// DefaultSearchDeadline is the wall-clock safety cap of one Search; the
	// node budget normally ends it first.
	DefaultSearchDeadline = 10 * time.Second
)

// defaultSearchWork caps the default node budget at this many nodes times
// the buffers of the largest independent group, so that a problem with
// thousands of buffers live together still takes seconds, not minutes.
const defaultSearchWork = 100_000_000

// ErrNoFit reports that no plan fits the requested capacity: either the
// search proved it, or it ran out of budget first (the message says which).
var ErrNoFit = errors.New("no plan fits the capacity")

// SearchOptions tune Search. The zero value minimises the peak with the
// default budgets.
type SearchOptions struct {
	// Capacity, if positive, is the arena size to fit: Search returns the
	// first plan whose peak is at most Capacity, or an error wrapping
	// ErrNoFit. If zero, Search minimises the peak.
	Capacity int64
	// Nodes bounds the search nodes visited (0: DefaultSearchNodes, less
	// for groups of more than 400 buffers live in turn). The result
	// depends only on the input and Nodes, unless Deadline or the context
	// stops the search first.
	Nodes int64
	// Deadline bounds the wall-clock time (0: DefaultSearchDeadline). When
	// it ends the search, the plan is the best found so far, which then
	// depends on the machine's speed.
	Deadline time.Duration
	// Stats, if not nil, receives what the search did.
	Stats *SearchStats
}

// SearchStats describe one Search.
type SearchStats struct {
	Lower   int64 // the lower bound: most aligned bytes live at one instant
	Greedy  int64 // the best greedy peak, where the search starts
	Peak    int64 // the peak reached (the greedy one if the search failed)
	Nodes   int64 // search nodes visited
	Optimal bool  // Peak is proved minimal
}

func init() {
	Register(Algorithm{
		Name:  "search",
		Short: "depth-first search over canonical placements toward the lower bound (MiniMalloc's ideas)",
		Place: func(ctx context.Context, p Problem) (Plan, error) { return Search(ctx, p, SearchOptions{}) },
	})
}

// Search places p's buffers by a depth-first search in the manner of
// MiniMalloc (Moffitt, ASPLOS'23). It starts from the best of a few greedy
// placements; then, with no Capacity, it searches for plans under smaller
// capacities, down to the lower bound, until the node budget or the
// deadline runs out, and returns the best plan found; with a Capacity, it
// returns the first plan that fits it. Same input and options, same plan,
// unless the deadline or ctx stop it.
//
// The search keeps tables that grow with the square of the buffers live
// at once; past a few million overlapping pairs, or with more than 2,000
// buffers in one group that shares no instant with the rest, Search does
// not search and returns the best greedy plan (Stats.Nodes is then 0).
func Search(ctx context.Context, p Problem, opts SearchOptions) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	res, err := searchPlace(ctx, p.Buffers, p.align(), opts)
	if opts.Stats != nil {
		*opts.Stats = SearchStats{Lower: res.lower, Greedy: res.greedy, Peak: res.peak, Nodes: res.nodes, Optimal: res.optimal}
	}
	if err != nil {
		return Plan{}, err
	}
	return Plan{Offsets: res.off, Peak: res.peak}, nil
}

// CapacityFromFilename reads the capacity that MiniMalloc's benchmark
// files carry in their names, as in "A.1048576.csv": the number between
// the last two dots. It reports false for any other name.
func CapacityFromFilename(path string) (int64, bool) {
	base := strings.TrimSuffix(filepath.Base(path), ".csv")
	dot := strings.LastIndexByte(base, '.')
	if dot < 0 {
		return 0, false
	}
	c, err := strconv.ParseInt(base[dot+1:], 10, 64)
	if err != nil || c <= 0 {
		return 0, false
	}
	return c, true
}

// Limits beyond which Search does not search (see Search); variables so
// that tests can lower them.
var (
	maxSearchPairs int64 = 4_000_000 // overlapping pairs of buffers
	maxSearchCells int64 = 8_000_000 // the sizes of all sections, summed
	maxSearchPart        = 2_000     // buffers in one independent group
)

// othersBest returns the best plan of the package's greedy-by-size and
// best-fit, or peak -1 if neither is registered or both fail (as they do
// when ctx is done): the search starts from the best of these and its own
// greedy orders, so it is never worse than either.
func othersBest(ctx context.Context, bufs []Buffer, align int64) ([]int64, int64) {
	p := Problem{Buffers: bufs, Alignment: align}
	var off []int64
	peak := int64(-1)
	for _, name := range []string{"greedy-by-size", "best-fit"} {
		a, err := Lookup(name)
		if err != nil {
			continue
		}
		if pl, err := a.Place(ctx, p); err == nil && (peak < 0 || pl.Peak < peak) {
			off, peak = pl.Offsets, pl.Peak
		}
	}
	return off, peak
}

// searchResult is the outcome of searchPlace.
type searchResult struct {
	off     []int64 // offset of each buffer
	peak    int64   // max over buffers of offset + aligned size
	lower   int64   // most aligned bytes live at one instant
	greedy  int64   // the best greedy peak
	nodes   int64   // search nodes visited
	optimal bool    // peak is proved minimal
}

// searchPlace is the core of Search over plain buffers.
func searchPlace(ctx context.Context, bufs []Buffer, align int64, opts SearchOptions) (searchResult, error) {
	if align <= 0 {
		return searchResult{}, fmt.Errorf("search: alignment %d must be positive", align)
	}
	n := len(bufs)
	start, end, size := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, b := range bufs {
		if err := b.Validate(); err != nil {
			return searchResult{}, fmt.Errorf("search: buffer %d: %w", i, err)
		}
		start[i], end[i], size[i] = b.Start, b.End, alignUp(b.Size, align)
	}
	if opts.Deadline <= 0 {
		opts.Deadline = DefaultSearchDeadline
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Deadline)
	defer cancel()

	offOthers, peakOthers := othersBest(ctx, bufs, align)
	tooBig := func(res searchResult) (searchResult, error) {
		if c := opts.Capacity; c > 0 && res.peak > c {
			return res, fmt.Errorf("search: problem too large to search; greedy peak %d exceeds capacity %d: %w", res.peak, c, ErrNoFit)
		}
		return res, nil
	}
	if pairs, cells := sweepCost(start, end); pairs > maxSearchPairs || cells > maxSearchCells {
		if peakOthers < 0 {
			return searchResult{}, fmt.Errorf("search: problem too large to search (%d overlapping pairs) and no greedy plan (context: %v)", pairs, ctx.Err())
		}
		res := searchResult{lower: LowerBound((Problem{Buffers: bufs, Alignment: align}).Aligned()), off: offOthers, peak: peakOthers}
		res.greedy, res.optimal = res.peak, res.peak == res.lower
		return tooBig(res)
	}
	sw := newSearchSweep(start, end, size)
	res := searchResult{lower: sw.lowerBound()}
	res.off, res.peak = greedyBest(sw, align)
	if peakOthers >= 0 && peakOthers < res.peak {
		res.off, res.peak = offOthers, peakOthers
	}
	res.greedy = res.peak
	res.optimal = res.peak == res.lower
	if n == 0 || slices.ContainsFunc(sw.parts, func(p searchPart) bool { return len(p.bufs) > maxSearchPart }) {
		return tooBig(res)
	}
	if opts.Nodes <= 0 {
		// A node costs time in proportion to its group's buffers.
		biggest := 0
		for _, p := range sw.parts {
			biggest = max(biggest, len(p.bufs))
		}
		opts.Nodes = min(DefaultSearchNodes, defaultSearchWork/int64(biggest))
	}
	srch := newSearcher(ctx, sw, align)
	limit := 2 * int64(n) // the first node limit of each heuristic
	if c := opts.Capacity; c > 0 {
		if res.peak <= c {
			return res, nil
		}
		if res.lower > c {
			return res, fmt.Errorf("search: capacity %d is below the lower bound %d: %w", c, res.lower, ErrNoFit)
		}
		for ; ; limit *= 2 {
			st := srch.round(c, limit, opts.Nodes)
			res.nodes = srch.used
			switch st {
			case dfsFound:
				res.off, res.peak = srch.sol, peakOf(sw, srch.sol)
				res.optimal = res.peak == res.lower
				return res, nil
			case dfsInfeasible:
				return res, fmt.Errorf("search: capacity %d proved infeasible: %w", c, ErrNoFit)
			case dfsCancelled:
				return res, fmt.Errorf("search: capacity %d not reached before the deadline (best %d): %w: %w", c, res.peak, ErrNoFit, ctx.Err())
			}
			if srch.used >= opts.Nodes {
				return res, fmt.Errorf("search: capacity %d not reached in %d nodes (best %d): %w", c, srch.used, res.peak, ErrNoFit)
			}
		}
	}
	// Minimise. Each round, with a doubled node limit, first tries the
	// lower bound itself (capacities below proved are known infeasible),
	// where an optimal plan often lies; then one step down from the best
	// peak so far, by 1/k of the gap to proved. A step that runs out of
	// nodes doubles k: near the optimum steps get costly, and small ones
	// keep the plan improving.
	proved, k := res.lower, int64(4)
	for ; res.peak > proved && srch.used < opts.Nodes && ctx.Err() == nil; limit *= 2 {
		tried := proved
		switch srch.round(proved, limit, opts.Nodes) {
		case dfsFound:
			res.off, res.peak = srch.sol, peakOf(sw, srch.sol)
			continue
		case dfsInfeasible:
			proved++
		}
		c := res.peak - max((res.peak-proved)/k, 1)
		if c < proved || c == tried {
			continue
		}
		switch srch.round(c, limit, opts.Nodes) {
		case dfsFound:
			res.off, res.peak = srch.sol, peakOf(sw, srch.sol)
		case dfsInfeasible:
			proved = c + 1
		case dfsAborted:
			k *= 2
		}
	}
	res.nodes = srch.used
	res.optimal = res.peak <= proved
	return res, nil
}

// lowerBound is the most aligned bytes live at one instant.
func (sw *searchSweep) lowerBound() int64 {
	lb := int64(0)
	for _, sec := range sw.sections {
		t := int64(0)
		for _, b := range sec {
			t += sw.size[b]
		}
		lb = max(lb, t)
	}
	return lb
}

// peakOf is the top of the highest buffer.
func peakOf(sw *searchSweep, off []int64) int64 {
	p := int64(0)
	for i, o := range off {
		p = max(p, o+sw.size[i])
	}
	return p
}
