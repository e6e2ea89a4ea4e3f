package planner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// shifted wraps an algorithm with an injected bug: after placing, it moves
// buffer victim onto the offset of another buffer live at the same time
// (and restates the peak so only the overlap is wrong).
func shifted(a Algorithm, victim int) Algorithm {
	return Algorithm{Name: a.Name + "+bug", Place: func(ctx context.Context, p Problem) (Plan, error) {
		pl, err := a.Place(ctx, p)
		if err != nil {
			return pl, err
		}
		for j, b := range p.Buffers {
			if j != victim && b.Overlaps(p.Buffers[victim]) {
				pl.Offsets[victim] = pl.Offsets[j]
				break
			}
		}
		pl.Peak = p.PeakOf(pl.Offsets)
		return pl, nil
	}}
}

// TestInjectedOverlapCaught shows that both verifications, each on its
// own, reject a plan from a planner with an overlap bug, and that Run
// turns it into an error.
func TestInjectedOverlapCaught(t *testing.T) {
	p := mustLower(t, ABC(false), 1)
	for _, a := range Algorithms()[:3] {
		t.Run(a.Name, func(t *testing.T) {
			bug := shifted(a, 1) // b onto a: both live at kernel 1
			pl, err := bug.Place(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyNoOverlap(p, pl); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
				t.Errorf("VerifyNoOverlap = %v, want ErrBadPlan naming a and b", err)
			}
			if err := Simulate(p, pl); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"b"`) {
				t.Errorf("Simulate = %v, want ErrBadPlan naming a and b", err)
			}
			if _, err := bug.Run(context.Background(), p); !errors.Is(err, ErrBadPlan) {
				t.Errorf("Run with a buggy planner = %v, want ErrBadPlan", err)
			}
			// Negative control: the unmodified planner passes both.
			good, _ := a.Place(context.Background(), p)
			if err := VerifyNoOverlap(p, good); err != nil {
				t.Errorf("VerifyNoOverlap(good plan) = %v", err)
			}
			if err := Simulate(p, good); err != nil {
				t.Errorf("Simulate(good plan) = %v", err)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	p := Problem{Buffers: []Buffer{{"a", 0, 2, 64}, {"b", 2, 3, 64}}, Alignment: 64}
	tests := []struct {
		name string
		pl   Plan
		want string
	}{
		{"good", Plan{[]int64{0, 0}, 64}, ""},
		{"misaligned", Plan{[]int64{0, 32}, 96}, "not aligned"},
		{"peak understated", Plan{[]int64{0, 64}, 64}, "outside the arena"},
		{"peak overstated", Plan{[]int64{0, 0}, 128}, "states peak 128"},
		{"negative offset", Plan{[]int64{-64, 0}, 64}, "outside the arena"},
		{"too few offsets", Plan{[]int64{0}, 64}, "1 offsets for 2 buffers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(p, tc.pl)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Check(%v) = %v, want %q", tc.pl, err, tc.want)
			}
		})
	}
}

// TestOneByteOverlap: buffers live together that share exactly one byte
// are caught by both verifications; touching lifetimes are not overlaps.
func TestOneByteOverlap(t *testing.T) {
	p := Problem{Buffers: []Buffer{{"a", 0, 2, 10}, {"b", 1, 3, 10}}, Alignment: 1}
	bad := Plan{Offsets: []int64{0, 9}, Peak: 19}
	if VerifyNoOverlap(p, bad) == nil || Simulate(p, bad) == nil {
		t.Errorf("a one-byte overlap passed: sweep %v, simulate %v", VerifyNoOverlap(p, bad), Simulate(p, bad))
	}
	p.Buffers[1].Start = 2 // now a is dead when b is written
	if err := Check(p, bad); err != nil {
		t.Errorf("touching lifetimes rejected: %v", err)
	}
}

// bruteOverlap is the O(n²) reference: any two buffers live together
// sharing a byte.
func bruteOverlap(p Problem, pl Plan) bool {
	for i, a := range p.Buffers {
		for j := i + 1; j < len(p.Buffers); j++ {
			b := p.Buffers[j]
			if a.Overlaps(b) && pl.Offsets[i] < pl.Offsets[j]+b.Size && pl.Offsets[j] < pl.Offsets[i]+a.Size {
				return true
			}
		}
	}
	return false
}

// TestVerifiersAgreeWithBruteForce corrupts random plans and checks that
// the sweep and the simulation each say exactly what the brute force says.
func TestVerifiersAgreeWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	bad := 0
	for seed := range uint64(300) {
		p := Problem{Buffers: Random(seed, RandomSpec{N: 2 + int(seed%20), Horizon: 12, MaxLife: 5, MinSize: 1, MaxSize: 50}), Alignment: 1}
		pl, err := placeBestFit(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if seed%3 != 0 { // corrupt two offsets out of three
			i := rng.IntN(len(pl.Offsets))
			pl.Offsets[i] = rng.Int64N(pl.Peak + 1)
			pl.Peak = p.PeakOf(pl.Offsets)
		}
		want := bruteOverlap(p, pl)
		if want {
			bad++
		}
		sweep, sim := VerifyNoOverlap(p, pl) != nil, Simulate(p, pl) != nil
		if sweep != want || sim != want {
			t.Fatalf("seed %d: overlap %v, but sweep says %v and simulation %v (plan %v, buffers %v)", seed, want, sweep, sim, pl, p.Buffers)
		}
	}
	if bad < 50 {
		t.Errorf("only %d corrupted plans overlapped: the test does not exercise the verifiers", bad)
	}
}

func TestRankSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 63, 64, 65, 200, 4097, 70000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			tree := newRankSet(n)
			in := make([]bool, n)
			for k := range 400 {
				r := rng.IntN(n)
				if k%2 == 0 && n > 64 { // cluster near the ends and word edges too
					r = []int{0, 63, 64, n - 1, n - 64}[rng.IntN(5)]
				}
				if in[r] {
					tree.remove(r)
				} else {
					tree.add(r)
				}
				in[r] = !in[r]
				q := rng.IntN(n+2) - 1
				if k%3 == 0 {
					q = min(max(r+rng.IntN(130)-65, -1), n)
				}
				after, before := -1, -1
				for k := n - 1; k >= max(q, 0); k-- { // q = -1 asks from rank 0
					if in[k] {
						after = k
					}
				}
				for k := 0; k <= min(q, n-1); k++ {
					if in[k] {
						before = k
					}
				}
				if got := tree.atOrAfter(q); got != after {
					t.Fatalf("atOrAfter(%d) = %d, want %d (set %v)", q, got, after, in)
				}
				if got := tree.atOrBefore(q); got != before {
					t.Fatalf("atOrBefore(%d) = %d, want %d (set %v)", q, got, before, in)
				}
			}
		})
	}
}
