package planner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// forkJoin is a two-branch program: b and c on one branch, d on the other,
// joined by y. With streams, d's op runs on stream 1.
func forkJoin(streams bool) Program {
	p := Program{
		Ops: []Op{
			{Fn: "input", Out: "a", Size: 64},
			{Fn: "f", Out: "b", Size: 64, In: []string{"a"}},
			{Fn: "g", Out: "c", Size: 64, In: []string{"b"}},
			{Fn: "h", Out: "d", Size: 64, In: []string{"a"}},
			{Fn: "add", Out: "y", Size: 64, In: []string{"c", "d"}},
		},
		Outputs: []string{"y"},
	}
	if streams {
		p.Ops[3].Stream = 1
	}
	return p
}

func TestOrderForkJoin(t *testing.T) {
	o, err := forkJoin(true).Order()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		a, b       int
		before, cc bool
	}{
		{0, 3, true, false}, // a's writer, then h on stream 1
		{1, 2, true, false}, // stream order
		{1, 3, false, true}, // the two branches
		{2, 3, false, true},
		{3, 2, false, true},
		{3, 4, true, false}, // the join waits for stream 1
		{2, 4, true, false},
		{4, 3, false, false},
		{2, 2, false, false},
	}
	for _, tc := range tests {
		if got := o.Before(tc.a, tc.b); got != tc.before {
			t.Errorf("Before(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.before)
		}
		if got := o.Concurrent(tc.a, tc.b); got != tc.cc {
			t.Errorf("Concurrent(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.cc)
		}
	}
	for i, want := range []int{0, 1, 2, 1, 4} {
		if got := o.Earliest(i); got != want {
			t.Errorf("Earliest(%d) = %d, want %d", i, got, want)
		}
	}
	waits, err := forkJoin(true).Waits()
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{nil, nil, nil, {0}, {3}}; fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("Waits = %v, want %v", waits, want)
	}
}

// TestStreamLifetimes: under two streams d may no longer take b's storage
// (h may run while g still reads b), and the intervals say so.
func TestStreamLifetimes(t *testing.T) {
	for _, tc := range []struct {
		streams bool
		want    string
	}{
		{false, "a[0,3] b[1,2] c[2,4] d[3,4] y[4,4]"},
		{true, "a[0,3] b[1,2] c[2,4] d[1,4] y[4,4]"},
	} {
		temps, err := forkJoin(tc.streams).Temps()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tm := range temps {
			got = append(got, fmt.Sprintf("%s[%d,%d]", tm.Name, tm.First, tm.Last))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("streams=%v: lifetimes %s, want %s", tc.streams, g, tc.want)
		}
	}
}

// sharedPlan places b and d at one offset, the plan one stream allows.
func sharedPlan(t *testing.T, p Program) (Problem, Plan) {
	t.Helper()
	pr, _, err := p.Problem(64)
	if err != nil {
		t.Fatal(err)
	}
	off := map[string]int64{"a": 0, "b": 64, "c": 128, "d": 64, "y": 0}
	pl := Plan{Peak: 192}
	for _, b := range pr.Buffers {
		pl.Offsets = append(pl.Offsets, off[b.ID])
	}
	return pr, pl
}

// TestStreamChecksCatchRace: the plan that is right for one stream (d in
// b's storage) is a race under two, and both stream checks say so; on one
// stream both pass it.
func TestStreamChecksCatchRace(t *testing.T) {
	one, two := forkJoin(false), forkJoin(true)
	pr, pl := sharedPlan(t, one)
	if err := Check(pr, pl); err != nil {
		t.Fatalf("one stream: %v", err)
	}
	if err := one.VerifyOrder(pr, pl); err != nil {
		t.Errorf("one stream: VerifyOrder: %v", err)
	}
	if err := one.SimulateStreams(pr, pl, 16, 1); err != nil {
		t.Errorf("one stream: SimulateStreams: %v", err)
	}
	err := two.VerifyOrder(pr, pl)
	if !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), `"b" and "d"`) {
		t.Errorf("two streams: VerifyOrder = %v, want b and d unordered", err)
	}
	if err := two.SimulateStreams(pr, pl, 16, 1); !errors.Is(err, ErrBadPlan) {
		t.Errorf("two streams: SimulateStreams = %v, want a race found", err)
	}
	// The two-stream lifetimes themselves refuse the shared plan.
	pr2, _, err := two.Problem(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(pr2, pl); !errors.Is(err, ErrBadPlan) {
		t.Errorf("two-stream lifetimes accept b and d together: %v", err)
	}
}

func TestLegalUnderStreams(t *testing.T) {
	// h (stream 1) writing over a while f (stream 0) may still read it.
	p := forkJoin(true)
	p.Ops[0].Fn = "load"
	err := p.Legal(3, "a")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "does not happen before") {
		t.Errorf("Legal(h over a) = %v, want refused: f may still read a", err)
	}
	// g over b is fine on its own stream.
	if err := p.Legal(2, "b"); err != nil {
		t.Errorf("Legal(g over b) = %v", err)
	}
	// On one stream, h is a's last reader.
	if err := forkJoin(false).Legal(3, "a"); err != nil {
		t.Errorf("one stream: Legal(h over a) = %v", err)
	}
}

// randomProgram is a random DAG of n ops with views, in-place writes
// where legal, outputs and retained values, on streams streams.
func randomProgram(r *rand.Rand, n, streams int) Program {
	p := Program{}
	name := func(i int) string { return fmt.Sprintf("v%d", i) }
	for i := range n {
		op := Op{Fn: "op", Out: name(i), Size: int64(64 * (1 + r.IntN(8))), Stream: r.IntN(streams)}
		if i > 0 {
			for range 1 + r.IntN(3) {
				in := name(r.IntN(i))
				if !slices.Contains(op.In, in) {
					op.In = append(op.In, in)
				}
			}
			if r.IntN(8) == 0 && !p.Ops[i-1].View {
				op.View, op.In, op.Size = true, []string{name(i - 1)}, 0
			}
		}
		p.Ops = append(p.Ops, op)
	}
	p.Outputs = []string{name(n - 1)}
	if n > 4 && !p.Ops[n/2].View {
		p.Retained = []string{name(n / 2)}
	}
	for i := range p.Ops {
		if op := p.Ops[i]; !op.View && len(op.In) > 0 && r.IntN(3) == 0 {
			if p.Legal(i, op.In[0]) == nil {
				p.Ops[i].InPlace = op.In[0]
			}
		}
	}
	return p
}

// TestStreamPlansHold: for random programs on two and three streams, every
// placement algorithm's plan of the stream lifetimes passes the interval
// checks, VerifyOrder (the order itself, which the intervals must imply:
// the Earliest argument) and SimulateStreams.
func TestStreamPlansHold(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	ctx := context.Background()
	for k := range 60 {
		p := randomProgram(r, 4+r.IntN(40), 2+k%2)
		pr, _, err := p.Problem(64)
		if err != nil {
			t.Fatalf("program %d: %v", k, err)
		}
		for _, a := range Algorithms() {
			if a.Name == "search" && len(pr.Buffers) > 30 {
				continue
			}
			pl, err := a.Run(ctx, pr)
			if err != nil {
				t.Fatalf("program %d, %s: %v", k, a.Name, err)
			}
			if err := p.VerifyOrder(pr, pl); err != nil {
				t.Errorf("program %d, %s: VerifyOrder: %v", k, a.Name, err)
			}
			if err := p.SimulateStreams(pr, pl, 8, uint64(k)); err != nil {
				t.Errorf("program %d, %s: SimulateStreams: %v", k, a.Name, err)
			}
		}
	}
}

// TestStreamChecksAgree: a plan of the one-stream lifetimes run on
// streams is refused by VerifyOrder exactly when it places two unordered
// buffers together, and the simulation, given enough interleavings, finds
// a race in most of those (it needs the racing ops to overlap in time).
func TestStreamChecksAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	ctx := context.Background()
	greedy, err := Lookup("greedy-by-size")
	if err != nil {
		t.Fatal(err)
	}
	refused, caught := 0, 0
	for k := range 200 {
		p := randomProgram(r, 6+r.IntN(30), 2)
		one := p
		one.Ops = slices.Clone(p.Ops)
		for i := range one.Ops {
			one.Ops[i].Stream = 0
		}
		pr, _, err := one.Problem(64)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := greedy.Run(ctx, pr)
		if err != nil {
			t.Fatal(err)
		}
		if err := one.VerifyOrder(pr, pl); err != nil {
			t.Fatalf("program %d on one stream: %v", k, err)
		}
		if p.VerifyOrder(pr, pl) == nil {
			if err := p.SimulateStreams(pr, pl, 8, uint64(k)); err != nil {
				t.Errorf("program %d: VerifyOrder passes a plan SimulateStreams refuses: %v", k, err)
			}
			continue
		}
		refused++
		if p.SimulateStreams(pr, pl, 64, uint64(k)) != nil {
			caught++
		}
	}
	if refused < 20 || float64(caught) < 0.8*float64(refused) {
		t.Errorf("VerifyOrder refused %d of 200 one-stream plans on two streams; the simulation caught %d of those", refused, caught)
	}
	t.Logf("VerifyOrder refused %d of 200 one-stream plans on two streams; the simulation caught %d", refused, caught)
}

func TestMakespan(t *testing.T) {
	// h alone 4, beside g 6; f, g 2 each alone, 3 shared.
	costs := []Cost{{0, 0}, {2, 3}, {2, 3}, {4, 6}, {1, 1}}
	one, err := forkJoin(false).Makespan(costs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if one != 9 {
		t.Errorf("one stream: makespan %v, want 9 (2+2+4+1)", one)
	}
	// f and g run beside h: 6 of shared time does f, g (3 each) and h (6);
	// then add.
	two, err := forkJoin(true).Makespan(costs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if two != 7 {
		t.Errorf("two streams: makespan %v, want 7", two)
	}
	// With a sync of 0.5, h starts at 0.5 (f alone until then: 0.75 of
	// it left, 2.25 shared), g at 2.75 (h has 0.625 left), g ends at 5.75
	// (h 0.125 left, alone: 0.5), h at 6.25, add at 6.75+1.
	if two, _ := forkJoin(true).Makespan(costs, 0.5); two != 7.75 {
		t.Errorf("two streams, sync 0.5: makespan %v, want 7.75", two)
	}
}

func TestAssignStreams(t *testing.T) {
	tests := []struct {
		name  string
		costs []Cost
		want  []int
	}{
		// Side by side pays: h goes to the other stream, and the join to
		// the stream of its latest input (a tie).
		{"shared pays", []Cost{{0, 0}, {2, 3}, {2, 3}, {4, 6}, {1, 1}}, []int{0, 0, 0, 1, 1}},
		// The machine's second core makes every op twice as fast: one stream.
		{"split pays", []Cost{{0, 0}, {2, 4}, {2, 4}, {4, 8}, {1, 2}}, []int{0, 0, 0, 0, 0}},
	}
	for _, tc := range tests {
		a, err := forkJoin(false).AssignStreams(tc.costs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Streams, tc.want) {
			t.Errorf("%s: streams %v, want %v", tc.name, a.Streams, tc.want)
		}
		if a.TwoStreams > a.OneStream+1e-9 {
			t.Errorf("%s: two streams %v, slower than one %v", tc.name, a.TwoStreams, a.OneStream)
		}
	}
	if _, err := forkJoin(false).AssignStreams(nil, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("AssignStreams(no costs) = %v, want ErrInvalid", err)
	}
}

// TestAssignStreamsPinned: pinned ops run where pinned, whatever the
// costs say (here that one stream pays), and the rest are chosen as
// AssignStreams chooses; a pin outside -1…1, or pins of another length,
// are ErrInvalid.
func TestAssignStreamsPinned(t *testing.T) {
	split := []Cost{{0, 0}, {2, 4}, {2, 4}, {4, 8}, {1, 2}} // one stream pays
	tests := []struct {
		name string
		pin  []int
		want []int
	}{
		{"none", nil, []int{0, 0, 0, 0, 0}},
		{"free", []int{-1, -1, -1, -1, -1}, []int{0, 0, 0, 0, 0}},
		{"h on 1", []int{-1, -1, -1, 1, -1}, []int{0, 0, 0, 1, 1}}, // the join follows h (a tie)
		{"all", []int{1, 0, 1, 1, 0}, []int{1, 0, 1, 1, 0}},
	}
	for _, tc := range tests {
		a, err := forkJoin(false).AssignStreamsPinned(split, 0, tc.pin)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Streams, tc.want) {
			t.Errorf("%s: streams %v, want %v", tc.name, a.Streams, tc.want)
		}
	}
	for _, pin := range [][]int{{0, 0, 2, 0, 0}, {0, -2, 0, 0, 0}, {0, 0}} {
		if _, err := forkJoin(false).AssignStreamsPinned(split, 0, pin); !errors.Is(err, ErrInvalid) {
			t.Errorf("pins %v: %v, want ErrInvalid", pin, err)
		}
	}
}
