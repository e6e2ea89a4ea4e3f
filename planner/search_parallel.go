package planner

import (
	"context"
	"runtime"
	"slices"
)

// This file runs the rounds of the "search" planner's round robin, one
// heuristic per goroutine when the process has more than one processor.
// The outcome is the same as running the heuristics one after another:
// heuristic h only counts if every heuristic before it ran out of nodes,
// and then each of those used exactly its limit, so every node budget is
// known before any of them starts.

// searcher holds one search state per heuristic run at once.
type searcher struct {
	workers []*dfs
	procs   int     // heuristics run at once
	used    int64   // nodes visited in total, as if run one after another
	sol     []int64 // the offsets of the last solution found
}

func newSearcher(ctx context.Context, sw *searchSweep, align int64) *searcher {
	procs := min(runtime.GOMAXPROCS(0), len(searchHeuristics))
	s := &searcher{procs: procs}
	for range max(procs, 1) {
		s.workers = append(s.workers, newDFS(ctx, sw, align))
	}
	if procs > 1 {
		// Beyond procs, goroutines wait for a free processor, so one state
		// per heuristic is needed.
		for len(s.workers) < len(searchHeuristics) {
			s.workers = append(s.workers, newDFS(ctx, sw, align))
		}
	}
	return s
}

// round tries each heuristic with at most limit nodes (and budget nodes in
// all, counted in s.used) under capacity, taking the first in heuristic
// order that finds a solution or proves there is none. It reports
// dfsAborted if every heuristic ran out of nodes. Callers double limit
// from round to round, as MiniMalloc does, so that one unlucky order does
// not stall the search.
func (s *searcher) round(capacity, limit, budget int64) dfsStatus {
	var nodes []int64 // heuristic h's limit, if all before it run out
	for left := budget - s.used; len(nodes) < len(searchHeuristics) && left > 0; {
		n := min(limit, left)
		nodes = append(nodes, n)
		left -= n
	}
	if len(nodes) == 0 {
		return dfsAborted
	}
	for _, w := range s.workers {
		w.capacity = capacity
	}
	if s.procs <= 1 {
		w := s.workers[0]
		for h, n := range nodes {
			st, used := w.run(searchHeuristics[h], n)
			s.used += used
			if st == dfsFound {
				s.sol = slices.Clone(w.sol)
			}
			if st != dfsAborted {
				return st
			}
		}
		return dfsAborted
	}
	type result struct {
		st   dfsStatus
		used int64
	}
	results := make([]chan result, len(nodes))
	slots := make(chan struct{}, s.procs)
	for h, n := range nodes {
		results[h] = make(chan result, 1)
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			st, used := s.workers[h].run(searchHeuristics[h], n)
			results[h] <- result{st, used}
		}()
	}
	final := dfsAborted
	for h := range nodes {
		r := <-results[h]
		if final != dfsAborted {
			continue // draining the runs that were stopped
		}
		if r.st == dfsAborted {
			s.used += nodes[h]
			continue
		}
		final = r.st
		s.used += r.used
		if r.st == dfsFound {
			s.sol = slices.Clone(s.workers[h].sol)
		}
		for _, w := range s.workers[h+1:] {
			w.stop.Store(true)
		}
	}
	for _, w := range s.workers {
		w.stop.Store(false)
	}
	return final
}
