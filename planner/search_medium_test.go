package planner

import (
	"context"
	"testing"
)

// TestSearchNoWorseThanOthers runs every registered algorithm on random
// mid-sized problems: the search must verify, never fall below the bound,
// and never be beaten by another algorithm.
func TestSearchNoWorseThanOthers(t *testing.T) {
	proved, hard := 0, 0
	const cases = 40
	for seed := range uint64(cases) {
		p := Problem{Buffers: randomSmall(1000+seed, 60), Alignment: int64(1) << (seed % 3)}
		pl, st := searchChecked(t, p, SearchOptions{})
		if pl.Peak < p.Bound() {
			t.Fatalf("seed %d: peak %d below the bound %d", seed, pl.Peak, p.Bound())
		}
		if st.Optimal {
			proved++
		}
		if st.Greedy > st.Lower {
			hard++
		}
		for _, a := range Algorithms() {
			if a.Name == "search" {
				continue
			}
			other, err := a.Run(context.Background(), p)
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, a.Name, err)
			}
			if other.Peak < pl.Peak {
				t.Errorf("seed %d: %s peak %d beats search %d", seed, a.Name, other.Peak, pl.Peak)
			}
		}
	}
	t.Logf("%d of %d proved optimal; the greedy start missed the bound in %d", proved, cases, hard)
}

// spined is randomSmall(seed, n) joined into one group by a 1-byte
// buffer live throughout.
func spined(seed uint64, n int) []Buffer {
	return append(randomSmall(seed, n), Buffer{ID: "spine", Start: 0, End: 100, Size: 1})
}

// TestSearchLargeFallsBack lowers the limits past which Search does not
// search (too many overlapping pairs, too many buffers in one group) below
// a problem that needs searching, and checks that the search then stands
// aside for a greedy plan; with the limits in place it searches.
func TestSearchLargeFallsBack(t *testing.T) {
	bufs := spined(1, 40) // the greedy start misses the bound: a search is needed
	pairs, _ := sweepCost(startsEnds(bufs))
	for _, tc := range []struct {
		name     string
		pairs    int64
		part     int
		searched bool
	}{
		{"within the limits", maxSearchPairs, maxSearchPart, true},
		{"too many pairs", pairs - 1, maxSearchPart, false},
		{"group too large", maxSearchPairs, len(bufs) - 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldPairs, oldPart := maxSearchPairs, maxSearchPart
			maxSearchPairs, maxSearchPart = tc.pairs, tc.part
			defer func() { maxSearchPairs, maxSearchPart = oldPairs, oldPart }()
			p := Problem{Buffers: bufs, Alignment: 1}
			pl, st := searchChecked(t, p, SearchOptions{})
			if searched := st.Nodes > 0; searched != tc.searched || pl.Peak < p.Bound() {
				t.Errorf("%d nodes, peak %d, bound %d; want searched=%v", st.Nodes, pl.Peak, p.Bound(), tc.searched)
			}
			if tc.searched && (pl.Peak != p.Bound() || st.Greedy == p.Bound()) {
				t.Errorf("peak %d, greedy %d, bound %d; want greedy above the bound and search at it", pl.Peak, st.Greedy, p.Bound())
			}
		})
	}
}

func startsEnds(bufs []Buffer) (start, end []int64) {
	for _, b := range bufs {
		start, end = append(start, b.Start), append(end, b.End)
	}
	return start, end
}
