package planner

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gptlab/internal/testutil"
)

// bruteOptimum is the least peak over all orders of placing each buffer on
// top of the highest earlier buffer it overlaps. Any plan, sorted by offset
// with every buffer dropped as far as it goes, is such an order and no
// higher, so this is the optimum. It shares no code with the search.
func bruteOptimum(bufs []Buffer, align int64) int64 {
	n := len(bufs)
	size := make([]int64, n)
	for i, b := range bufs {
		size[i] = (b.Size + align - 1) / align * align
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	off := make([]int64, n)
	best := int64(-1)
	var rec func(k int, peak int64)
	rec = func(k int, peak int64) {
		if best >= 0 && peak >= best {
			return
		}
		if k == n {
			best = peak
			return
		}
		for j := k; j < n; j++ {
			perm[k], perm[j] = perm[j], perm[k]
			i := perm[k]
			at := int64(0)
			for _, e := range perm[:k] {
				if bufs[i].Overlaps(bufs[e]) {
					at = max(at, off[e]+size[e])
				}
			}
			off[i] = at
			rec(k+1, max(peak, at+size[i]))
			perm[k], perm[j] = perm[j], perm[k]
		}
	}
	rec(0, 0)
	return best
}

// randomSmall draws n buffers from seed: starts over a horizon of
// max(8, n/2) steps, lifetimes of 1 to 5 steps, sizes 1 to 40 bytes (up to
// 1000 when n > 16).
func randomSmall(seed uint64, n int) []Buffer {
	rng := rand.New(rand.NewPCG(seed, 7))
	horizon, maxSize := int64(max(8, n/2)), int64(40)
	if n > 16 {
		maxSize = 1000
	}
	bufs := make([]Buffer, n)
	for i := range bufs {
		s := rng.Int64N(horizon)
		bufs[i] = Buffer{ID: strconv.Itoa(i), Start: s, End: s + 1 + rng.Int64N(5), Size: 1 + rng.Int64N(maxSize)}
	}
	return bufs
}

// searchChecked runs Search and verifies its plan twice: with the package's
// Check and with this file's own verifyOffsets. Unless a test sets one, the
// deadline is far off, so that only the node budget ends a search and a
// loaded machine cannot change a result.
func searchChecked(t *testing.T, p Problem, opts SearchOptions) (Plan, SearchStats) {
	t.Helper()
	var st SearchStats
	opts.Stats = &st
	if opts.Deadline == 0 {
		opts.Deadline = 10 * time.Minute
	}
	pl, err := Search(context.Background(), p, opts)
	if err != nil {
		t.Fatalf("Search: %v", err)
	}
	if err := Check(p, pl); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := verifyOffsets(p.Buffers, max(p.Alignment, 1), pl.Offsets, pl.Peak); err != nil {
		t.Fatalf("verifyOffsets: %v", err)
	}
	return pl, st
}

func TestVerifyOffsetsRejects(t *testing.T) {
	bufs := []Buffer{{ID: "a", Start: 0, End: 2, Size: 10}, {ID: "b", Start: 1, End: 3, Size: 10}}
	for _, tc := range []struct {
		name string
		off  []int64
		peak int64
		ok   bool
	}{
		{"stacked", []int64{0, 10}, 20, true},
		{"overlap", []int64{0, 5}, 15, false},
		{"wrong peak", []int64{0, 10}, 25, false},
		{"negative", []int64{-10, 0}, 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := verifyOffsets(bufs, 1, tc.off, tc.peak); (err == nil) != tc.ok {
				t.Errorf("verifyOffsets(%v, %d) = %v, want ok=%v", tc.off, tc.peak, err, tc.ok)
			}
		})
	}
}

func TestSearchKnownOptimum(t *testing.T) {
	for _, tc := range []struct {
		name  string
		align int64
		bufs  []Buffer
		want  int64
	}{
		{"disjoint", 1, []Buffer{{"a", 0, 1, 100}, {"b", 1, 2, 80}, {"c", 2, 3, 60}}, 100},
		{"chain", 1, []Buffer{{"a", 0, 2, 100}, {"b", 1, 3, 80}, {"c", 2, 4, 60}}, 180},
		// MiniMalloc's examples/input.12.csv, capacity 12.
		{"minimalloc example", 1, []Buffer{{"b1", 0, 3, 4}, {"b2", 3, 9, 4}, {"b3", 0, 9, 4}, {"b4", 9, 21, 4}, {"b5", 0, 21, 4}}, 12},
		{"aligned", 64, []Buffer{{"a", 0, 2, 100}, {"b", 1, 3, 30}}, 192},
		{"one", 1, []Buffer{{"a", 5, 6, 7}}, 7},
		{"greedy trap", 1, greedyTrap, 110},
		{"above the bound", 1, aboveBound, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Problem{Buffers: tc.bufs, Alignment: tc.align}
			pl, st := searchChecked(t, p, SearchOptions{})
			if pl.Peak != tc.want || !st.Optimal {
				t.Errorf("Search(%v).Peak = %d (optimal %v), want %d proved", tc.bufs, pl.Peak, st.Optimal, tc.want)
			}
			if got := bruteOptimum(tc.bufs, tc.align); got != tc.want {
				t.Errorf("bruteOptimum(%v) = %d, want %d", tc.bufs, got, tc.want)
			}
		})
	}
}

// greedyTrap is a case where largest-first placement misses the optimum:
// "e" (60) goes to 0, then "a" beside it at 0 and "b" above both at 60,
// so "c" (30) finds no 30-byte gap and lands at 100: 130. The optimum puts
// "b" at 0 with "e" and "a" on it and "c" on "a": 110, the bound.
var greedyTrap = []Buffer{{"a", 2, 5, 40}, {"b", 0, 3, 40}, {"c", 2, 3, 30}, {"d", 4, 5, 10}, {"e", 1, 2, 60}}

// aboveBound is a case whose optimum, 12, exceeds the bound, 11 (found by
// a random search and confirmed by bruteOptimum).
var aboveBound = []Buffer{{"0", 2, 4, 2}, {"1", 0, 3, 5}, {"2", 3, 7, 4}, {"3", 7, 9, 6}, {"4", 2, 7, 4}, {"5", 7, 10, 2}, {"6", 5, 8, 3}, {"7", 1, 2, 6}}

func TestSearchBeatsGreedy(t *testing.T) {
	p := Problem{Buffers: greedyTrap, Alignment: 1}
	g, err := Lookup("greedy-by-size")
	if err != nil {
		t.Fatalf("Lookup(greedy-by-size) = %v: the package registers it itself", err)
	}
	gp, err := g.Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := searchChecked(t, p, SearchOptions{})
	if bound := p.Bound(); sp.Peak != bound || gp.Peak <= bound {
		t.Errorf("search peak %d, greedy-by-size %d, bound %d: want search at the bound and greedy above it", sp.Peak, gp.Peak, bound)
	}
}

func TestSearchMatchesBruteForce(t *testing.T) {
	for seed := range uint64(300) {
		n := 1 + int(seed%7)
		align := int64(1) << (seed % 4)
		p := Problem{Buffers: randomSmall(seed, n), Alignment: align}
		pl, st := searchChecked(t, p, SearchOptions{})
		if want := bruteOptimum(p.Buffers, align); pl.Peak != want || !st.Optimal {
			t.Fatalf("seed %d: Search(%v, align %d).Peak = %d (optimal %v), want %d", seed, p.Buffers, align, pl.Peak, st.Optimal, want)
		}
		if want := liveMax(p.Buffers, align); st.Lower != want {
			t.Fatalf("seed %d: Stats.Lower = %d, want %d", seed, st.Lower, want)
		}
	}
}

func TestSearchCapacity(t *testing.T) {
	p := Problem{Buffers: aboveBound, Alignment: 1} // optimum 12, bound 11
	for _, tc := range []struct {
		name     string
		capacity int64
		fits     bool
		why      string // in the error when it does not fit
	}{
		{"at the optimum", 12, true, ""},
		{"above it", 17, true, ""},
		{"at the bound", 11, false, "proved infeasible"},
		{"below the bound", 10, false, "below the lower bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := Search(context.Background(), p, SearchOptions{Capacity: tc.capacity})
			switch {
			case tc.fits && (err != nil || pl.Peak > tc.capacity):
				t.Errorf("Search(capacity %d) = peak %d, %v; want a fit", tc.capacity, pl.Peak, err)
			case !tc.fits && (!errors.Is(err, ErrNoFit) || !strings.Contains(err.Error(), tc.why)):
				t.Errorf("Search(capacity %d) = peak %d, %v; want ErrNoFit, %s", tc.capacity, pl.Peak, err, tc.why)
			case tc.fits:
				if err := Check(p, pl); err != nil {
					t.Errorf("Check: %v", err)
				}
			}
		})
	}
}

func TestSearchDeterministic(t *testing.T) {
	p := Problem{Buffers: randomSmall(9, 7), Alignment: 4}
	a, _ := searchChecked(t, p, SearchOptions{})
	b, _ := searchChecked(t, p, SearchOptions{})
	if !slices.Equal(a.Offsets, b.Offsets) {
		t.Errorf("two runs: offsets %v and %v", a.Offsets, b.Offsets)
	}
}

func TestSearchCancelledKeepsGreedy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := Problem{Buffers: randomSmall(3, 7), Alignment: 1}
	var st SearchStats
	pl, err := Search(ctx, p, SearchOptions{Stats: &st})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(p, pl); err != nil || pl.Peak != st.Greedy || st.Nodes != 0 {
		t.Errorf("cancelled Search: peak %d, greedy %d, nodes %d, Check %v; want the greedy plan", pl.Peak, st.Greedy, st.Nodes, err)
	}
}

func TestSearchInvalid(t *testing.T) {
	for _, p := range []Problem{
		{Buffers: []Buffer{{"a", 0, 1, 0}}, Alignment: 1},
		{Buffers: []Buffer{{"a", 2, 1, 4}}, Alignment: 1},
		{Buffers: []Buffer{{"a", 0, 1, 4}}, Alignment: 3},
	} {
		if _, err := Search(context.Background(), p, SearchOptions{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Search(%v) = %v, want ErrInvalid", p, err)
		}
	}
}

func TestCapacityFromFilename(t *testing.T) {
	for _, tc := range []struct {
		path string
		want int64
		ok   bool
	}{
		{"../shared/data/minimalloc/A.1048576.csv", 1048576, true},
		{"input.12.csv", 12, true},
		{"plan.csv", 0, false},
		{"x.-5.csv", 0, false},
		{"x.abc.csv", 0, false},
	} {
		got, ok := CapacityFromFilename(tc.path)
		if got != tc.want || ok != tc.ok {
			t.Errorf("CapacityFromFilename(%q) = %d, %v; want %d, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

// miniMallocNames are the challenge instances of MiniMalloc's benchmark.
var miniMallocNames = []string{"A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K"}

// miniMallocCapacity is the capacity every challenge instance fits.
const miniMallocCapacity = 1048576

func TestSearchMiniMalloc(t *testing.T) {
	dir := filepath.Join(testutil.Shared(t), "data", "minimalloc")
	names := miniMallocNames
	if testing.Short() {
		names = []string{"G", "K"}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			p := Problem{Buffers: loadMiniMallocCSV(t, filepath.Join(dir, name+".1048576.csv")), Alignment: 1}
			start := time.Now()
			pl, st := searchChecked(t, p, SearchOptions{Capacity: miniMallocCapacity})
			if pl.Peak > miniMallocCapacity || st.Greedy <= miniMallocCapacity {
				t.Errorf("%s: peak %d from greedy %d; want the search to bring a greedy start above %d under it", name, pl.Peak, st.Greedy, miniMallocCapacity)
			}
			t.Logf("%s: %d buffers, greedy %d, peak %d, bound %d, %d nodes, %v", name, len(p.Buffers), st.Greedy, pl.Peak, st.Lower, st.Nodes, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestSearchSameAcrossProcs checks that running the heuristics of a round
// at once changes nothing: on instance H (won by the second heuristic,
// after several rounds) the plan and node count match those of one
// processor.
func TestSearchSameAcrossProcs(t *testing.T) {
	dir := filepath.Join(testutil.Shared(t), "data", "minimalloc")
	p := Problem{Buffers: loadMiniMallocCSV(t, filepath.Join(dir, "H.1048576.csv")), Alignment: 1}
	var plans []Plan
	var nodes []int64
	for _, procs := range []int{1, 2, 3} {
		old := runtime.GOMAXPROCS(procs)
		pl, st := searchChecked(t, p, SearchOptions{Capacity: miniMallocCapacity})
		runtime.GOMAXPROCS(old)
		plans, nodes = append(plans, pl), append(nodes, st.Nodes)
	}
	for i := range plans[1:] {
		if !slices.Equal(plans[0].Offsets, plans[i+1].Offsets) || nodes[0] != nodes[i+1] {
			t.Errorf("GOMAXPROCS %d: %d nodes, offsets differ: %v; want those of GOMAXPROCS 1 (%d nodes)", i+2, nodes[i+1], !slices.Equal(plans[0].Offsets, plans[i+1].Offsets), nodes[0])
		}
	}
}

// TestSearchMiniMallocMinimise runs Search without a capacity on instance
// C, whose bound (1,039,360) lies below the capacity of its file: the
// search must reach the bound itself.
func TestSearchMiniMallocMinimise(t *testing.T) {
	dir := filepath.Join(testutil.Shared(t), "data", "minimalloc")
	p := Problem{Buffers: loadMiniMallocCSV(t, filepath.Join(dir, "C.1048576.csv")), Alignment: 1}
	pl, st := searchChecked(t, p, SearchOptions{})
	if pl.Peak != p.Bound() || !st.Optimal {
		t.Errorf("C: peak %d (optimal %v), want the bound %d", pl.Peak, st.Optimal, p.Bound())
	}
}

func BenchmarkSearchMiniMalloc(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	dir := filepath.Join(testutil.Shared(b), "data", "minimalloc")
	for _, name := range miniMallocNames {
		p := Problem{Buffers: loadMiniMallocCSV(b, filepath.Join(dir, name+".1048576.csv")), Alignment: 1}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var st SearchStats
			for b.Loop() {
				if _, err := Search(context.Background(), p, SearchOptions{Capacity: miniMallocCapacity, Stats: &st}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Nodes), "nodes/op")
		})
	}
}

// FuzzSearch decodes up to 8 buffers from the input (3 bytes each: start,
// length, size) and checks the plan and its optimality against brute force.
func FuzzSearch(f *testing.F) {
	f.Add([]byte{0, 2, 50, 1, 2, 60, 2, 2, 50, 3, 2, 60}, uint8(0))
	f.Add([]byte{2, 3, 40, 0, 3, 40, 2, 1, 30, 4, 1, 10, 1, 1, 60}, uint8(1))
	f.Add([]byte{0, 0, 0}, uint8(3))
	f.Add([]byte{2, 1, 1, 0, 2, 4, 3, 3, 3, 7, 1, 5, 2, 4, 3, 7, 2, 1, 5, 2, 2, 1, 0, 5}, uint8(0)) // aboveBound
	f.Add([]byte{255, 255, 255, 254, 1, 1, 7, 9, 200}, uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, alignLog uint8) {
		var bufs []Buffer
		for i := 0; i+2 < len(data) && len(bufs) < 8; i += 3 {
			s := int64(data[i] % 16)
			bufs = append(bufs, Buffer{ID: strconv.Itoa(len(bufs)), Start: s, End: s + 1 + int64(data[i+1]%6), Size: 1 + int64(data[i+2])})
		}
		align := int64(1) << (alignLog % 5)
		p := Problem{Buffers: bufs, Alignment: align}
		pl, st := searchChecked(t, p, SearchOptions{Nodes: 100_000})
		if want := bruteOptimum(bufs, align); pl.Peak != want || !st.Optimal || st.Lower != p.Bound() {
			t.Errorf("Search(%v, align %d) = peak %d (optimal %v, lower %d), want %d (bound %d)", bufs, align, pl.Peak, st.Optimal, st.Lower, want, p.Bound())
		}
	})
}

// BenchmarkSearchMiniMallocMinimise runs Search without a capacity, with
// the default budgets, and reports the peak reached.
func BenchmarkSearchMiniMallocMinimise(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	dir := filepath.Join(testutil.Shared(b), "data", "minimalloc")
	for _, name := range miniMallocNames {
		p := Problem{Buffers: loadMiniMallocCSV(b, filepath.Join(dir, name+".1048576.csv")), Alignment: 1}
		b.Run(name, func(b *testing.B) {
			var st SearchStats
			for b.Loop() {
				if _, err := Search(context.Background(), p, SearchOptions{Stats: &st}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Nodes), "nodes/op")
			b.ReportMetric(float64(st.Peak), "peak_bytes")
		})
	}
}

// FuzzCapacityFromFilename checks that a capacity read from a name is
// positive and survives writing it back into a name.
func FuzzCapacityFromFilename(f *testing.F) {
	for _, s := range []string{"A.1048576.csv", "input.12.csv", "plan.csv", "x.-5.csv", "a/b.7/c.csv", ".9.csv"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		c, ok := CapacityFromFilename(path)
		if !ok {
			return
		}
		if c <= 0 {
			t.Fatalf("CapacityFromFilename(%q) = %d, true; want a positive capacity", path, c)
		}
		if back, ok := CapacityFromFilename("x." + strconv.FormatInt(c, 10) + ".csv"); !ok || back != c {
			t.Fatalf("CapacityFromFilename(x.%d.csv) = %d, %v; want %d", c, back, ok, c)
		}
	})
}
