package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// mustRun plans p with the named algorithm and checks the plan.
func mustRun(t *testing.T, name string, p Problem) Plan {
	t.Helper()
	a, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := a.Run(context.Background(), p)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return pl
}

func mustLower(t *testing.T, temps []Temp, align int64) Problem {
	t.Helper()
	p, err := Lower(temps, align)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustProgram(t *testing.T, prog Program, align int64) Problem {
	t.Helper()
	p, _, err := prog.Problem(align)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const mb = 1 << 20

// TestChapterExamples plans the chapter's worked examples and compares the
// peaks with the figures stated in the text.
func TestChapterExamples(t *testing.T) {
	tests := []struct {
		name        string
		p           Problem
		independent int64
		bestFit     int64
		bound       int64
	}{
		{"abc", mustLower(t, ABC(false), 1), 2304, 1536, 1536},
		{"abc late b", mustLower(t, ABC(true), 1), 2304, 1536, 1536},
		{"touching 100/80/60", mustLower(t, Touching(), 1), 240, 180, 180},
		{"residual chain 64MB", mustProgram(t, ResidualChain(64*mb, false), 1), 384 * mb, 192 * mb, 192 * mb},
		{"residual chain 64MB in-place", mustProgram(t, ResidualChain(64*mb, true), 1), 256 * mb, 128 * mb, 128 * mb},
		{"residual chain 128MB", mustProgram(t, ResidualChain(128*mb, false), 1), 768 * mb, 384 * mb, 384 * mb},
		{"residual chain 128MB in-place", mustProgram(t, ResidualChain(128*mb, true), 1), 512 * mb, 256 * mb, 256 * mb},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustRun(t, "independent", tc.p).Peak; got != tc.independent {
				t.Errorf("independent peak = %d, want %d", got, tc.independent)
			}
			if got := mustRun(t, "best-fit", tc.p).Peak; got != tc.bestFit {
				t.Errorf("best-fit peak = %d, want %d", got, tc.bestFit)
			}
			if got := tc.p.Bound(); got != tc.bound {
				t.Errorf("Bound() = %d, want %d", got, tc.bound)
			}
			if got := mustRun(t, "greedy-by-size", tc.p).Peak; got < tc.bound {
				t.Errorf("greedy-by-size peak = %d below the bound %d", got, tc.bound)
			}
		})
	}
}

// TestTouchingOffByOne is the negative control of the half-open rule:
// reading the half-open end as inclusive (End+1) must cost 240, not 180.
func TestTouchingOffByOne(t *testing.T) {
	p := mustLower(t, Touching(), 1)
	for i := range p.Buffers {
		p.Buffers[i].End++
	}
	if got := mustRun(t, "best-fit", p).Peak; got != 240 {
		t.Errorf("best-fit with inclusive ends = %d, want 240", got)
	}
}

// TestBestFitRule checks the chapter's rule on small cases: the smallest
// fitting slot, no reuse at the step of the last read, no splitting.
func TestBestFitRule(t *testing.T) {
	tests := []struct {
		name string
		bufs []Buffer
		want []int64
	}{
		{"smallest free slot that fits", []Buffer{
			{"big", 0, 1, 100}, {"mid", 0, 1, 60}, {"small", 0, 1, 40}, {"new", 1, 2, 50},
		}, []int64{0, 100, 160, 100}},
		{"no reuse while the old one is read", []Buffer{
			{"a", 0, 2, 100}, {"b", 1, 3, 100},
		}, []int64{0, 100}},
		{"reuse from the step after the last read", []Buffer{
			{"a", 0, 2, 100}, {"b", 2, 3, 100},
		}, []int64{0, 0}},
		{"no splitting: two small ones need two slots", []Buffer{
			{"a", 0, 1, 100}, {"b", 1, 2, 40}, {"c", 1, 2, 40},
		}, []int64{0, 0, 100}},
		{"too small a slot is not taken", []Buffer{
			{"a", 0, 1, 40}, {"b", 1, 2, 100},
		}, []int64{0, 40}},
		{"ties go to the lowest offset", []Buffer{
			{"a", 0, 1, 64}, {"b", 0, 1, 64}, {"c", 1, 2, 64},
		}, []int64{0, 64, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := mustRun(t, "best-fit", Problem{Buffers: tc.bufs, Alignment: 1})
			if fmt.Sprint(pl.Offsets) != fmt.Sprint(tc.want) {
				t.Errorf("best-fit offsets = %v, want %v", pl.Offsets, tc.want)
			}
		})
	}
}

// TestGreedyBySizeRule checks TFLite's rule: largest first, smallest gap.
func TestGreedyBySizeRule(t *testing.T) {
	// big [0,4) and big2 [0,4) stack; the gap that opens between two
	// buffers that die is reused by a later smaller one only if it fits.
	bufs := []Buffer{
		{"a", 0, 2, 100}, // placed first: offset 0
		{"b", 0, 4, 80},  // overlaps a: on top, 100
		{"c", 2, 4, 90},  // overlaps b only: gap [0,100) fits -> 0
		{"d", 0, 1, 30},  // overlaps a, b: gap none below 180 -> 180
		{"e", 3, 4, 10},  // overlaps b, c: gaps [90,100) of 10 -> 90
	}
	pl := mustRun(t, "greedy-by-size", Problem{Buffers: bufs, Alignment: 1})
	want := []int64{0, 100, 0, 180, 90}
	if fmt.Sprint(pl.Offsets) != fmt.Sprint(want) {
		t.Errorf("greedy-by-size offsets = %v, want %v", pl.Offsets, want)
	}
}

func TestAlignment(t *testing.T) {
	bufs := []Buffer{{"a", 0, 2, 100}, {"b", 1, 3, 1}, {"c", 2, 4, 65}}
	for _, a := range Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			p := Problem{Buffers: bufs, Alignment: 64}
			pl := mustRun(t, a.Name, p)
			for i, off := range pl.Offsets {
				if off%64 != 0 {
					t.Errorf("offset of %s = %d, not a multiple of 64", bufs[i].ID, off)
				}
			}
			if pl.Peak < p.Bound() || p.Bound() != 128+64 {
				t.Errorf("peak %d, bound %d; want bound 192 <= peak", pl.Peak, p.Bound())
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ok := []Buffer{{"a", 0, 1, 8}}
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"zero alignment", Problem{ok, 0}, "alignment 0"},
		{"alignment not a power of two", Problem{ok, 48}, "alignment 48"},
		{"zero size", Problem{[]Buffer{{"z", 0, 1, 0}}, 1}, `"z": size 0`},
		{"negative size", Problem{[]Buffer{{"n", 0, 1, -4}}, 1}, `"n": size -4`},
		{"empty lifetime", Problem{[]Buffer{{"e", 3, 3, 4}}, 1}, `"e": lifetime [3, 3)`},
		{"reversed lifetime", Problem{[]Buffer{{"r", 3, 1, 4}}, 1}, `"r": lifetime [3, 1)`},
		{"duplicate id", Problem{[]Buffer{{"d", 0, 1, 4}, {"d", 1, 2, 4}}, 1}, `"d" appears twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range Algorithms() {
				_, err := a.Run(context.Background(), tc.p)
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s.Run = %v, want ErrInvalid naming %q", a.Name, err, tc.want)
				}
			}
		})
	}
	if _, err := Lookup("no-such"); err == nil || !strings.Contains(err.Error(), "best-fit") {
		t.Errorf("Lookup(no-such) = %v, want an error listing the known planners", err)
	}
}

func TestLowerBound(t *testing.T) {
	tests := []struct {
		name string
		bufs []Buffer
		want int64
	}{
		{"empty", nil, 0},
		{"touching do not add", []Buffer{{"a", 0, 1, 5}, {"b", 1, 2, 7}}, 7},
		{"overlap adds", []Buffer{{"a", 0, 2, 5}, {"b", 1, 2, 7}}, 12},
		{"peak in the middle", []Buffer{{"a", 0, 10, 1}, {"b", 2, 4, 10}, {"c", 3, 5, 100}, {"d", 4, 6, 1000}}, 1101},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LowerBound(tc.bufs); got != tc.want {
				t.Errorf("LowerBound(%v) = %d, want %d", tc.bufs, got, tc.want)
			}
		})
	}
}

// bruteBound is the reference: the most bytes live at any start instant.
func bruteBound(bufs []Buffer) int64 {
	var best int64
	for _, b := range bufs {
		var live int64
		for _, c := range bufs {
			if c.Start <= b.Start && b.Start < c.End {
				live += c.Size
			}
		}
		best = max(best, live)
	}
	return best
}

// TestRandomPlans plans random problems with every algorithm: each plan
// passes Check, lies between the bound and the naive sum, and the bound
// agrees with the brute-force reference.
func TestRandomPlans(t *testing.T) {
	for seed := range uint64(40) {
		spec := RandomSpec{N: 1 + int(seed)*5, Horizon: 30, MaxLife: 10, MinSize: 1, MaxSize: 300}
		p := Problem{Buffers: Random(seed, spec), Alignment: 1 << (seed % 4)}
		bound := p.Bound()
		if want := bruteBound(p.Aligned()); bound != want {
			t.Fatalf("seed %d: Bound = %d, brute force %d", seed, bound, want)
		}
		for _, a := range Algorithms()[:3] { // this package's; search tests itself
			pl, err := a.Run(context.Background(), p)
			if err != nil {
				t.Fatalf("seed %d %s: %v", seed, a.Name, err)
			}
			if pl.Peak < bound || pl.Peak > p.Naive() {
				t.Errorf("seed %d %s: peak %d outside [bound %d, naive %d]", seed, a.Name, pl.Peak, bound, p.Naive())
			}
		}
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Register(best-fit) twice did not panic")
		}
	}()
	Register(bestFitAlgorithm)
}
