package planner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestResidualChainLifetimes(t *testing.T) {
	temps, err := ResidualChain(64, false).Temps()
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, tm := range temps {
		got += fmt.Sprintf("%s[%d,%d]%v ", tm.Name, tm.First, tm.Last, tm.Kind)
	}
	want := "x[0,3]temporary a[1,2]temporary b[2,3]temporary c[3,4]temporary d[4,5]temporary y[5,5]output "
	if got != want {
		t.Errorf("ResidualChain lifetimes = %q, want %q", got, want)
	}
	temps, err = ResidualChain(64, true).Temps()
	if err != nil {
		t.Fatal(err)
	}
	if temps[1].Name != "a/b/c" || temps[1].First != 1 || temps[1].Last != 4 || len(temps) != 4 {
		t.Errorf("in-place chain = %+v, want a/b/c merged over [1,4] and 4 values", temps)
	}
}

func TestBranchedLowering(t *testing.T) {
	p, temps, err := Branched(false).Problem(1)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Buffer{}
	for _, b := range p.Buffers {
		byID[b.ID] = b
	}
	end := int64(len(Branched(false).Ops))
	tests := []struct {
		id         string
		start, end int64
	}{
		{"x", 0, end},       // caller's input: the whole run
		{"r", 2, end},       // retained for backward: to the end
		{"p", 3, end},       // read through the view f by the head (op 9)
		{"y", end - 1, end}, // output
		{"s", 4, 6},
	}
	for _, tc := range tests {
		if b := byID[tc.id]; b.Start != tc.start || b.End != tc.end {
			t.Errorf("buffer %s = [%d, %d), want [%d, %d)", tc.id, b.Start, b.End, tc.start, tc.end)
		}
	}
	if _, ok := byID["f"]; ok || len(p.Buffers) != len(temps)-1 {
		t.Errorf("the view f got a buffer: %v", p.Buffers)
	}
}

// TestLegal lists in-place and donation requests with the reason each is
// refused, and the legal ones.
func TestLegal(t *testing.T) {
	chain := ResidualChain(64, false)
	owned := chain
	owned.Inputs = []string{"x"}
	donated := owned
	donated.Donated = []string{"x"}
	grow := ResidualChain(64, false)
	grow.Ops = append([]Op(nil), grow.Ops...)
	grow.Ops[2].Size = 128
	br := Branched(false)
	tests := []struct {
		name string
		p    Program
		op   int
		in   string
		want string // "" for legal
	}{
		{"bias over a", chain, 2, "a", ""},
		{"gelu+add over b", chain, 3, "b", ""},
		{"gelu+add over loaded x", chain, 3, "x", ""},
		{"matmul over x read later", chain, 1, "x", `"x" is read again by op 3 (gelu+add)`},
		{"over a caller's input", owned, 3, "x", "program input the caller still owns"},
		{"over a donated input", donated, 3, "x", ""},
		{"over a weight", chain, 1, "W", "not written by the program"},
		{"over a value the op does not read", chain, 2, "x", "does not read"},
		{"output larger than input", grow, 2, "a", "does not fit"},
		{"over a retained value", br, 3, "r", "is retained"},
		{"over a value read later through a view", br, 6, "p", `read again by op 9 (head)`},
		{"over a view", br, 9, "f", "is a view of"},
		{"over an output", Program{Ops: []Op{{Fn: "in", Out: "o", Size: 8}, {Fn: "neg", Out: "z", Size: 8, In: []string{"o"}}}, Outputs: []string{"o", "z"}}, 1, "o", "program output"},
		{"no such op", chain, 9, "a", "no op 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Legal(tc.op, tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Legal(%d, %q) = %v, want nil", tc.op, tc.in, err)
			case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Legal(%d, %q) = %v, want ErrRefused with %q", tc.op, tc.in, err, tc.want)
			}
		})
	}
	// An illegal request in the program itself stops Temps.
	bad := owned
	bad.Ops = append([]Op(nil), bad.Ops...)
	bad.Ops[3].InPlace = "x"
	if _, err := bad.Temps(); !errors.Is(err, ErrRefused) {
		t.Errorf("Temps with an illegal in-place = %v, want ErrRefused", err)
	}
}

func TestProgramErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Program
		want string
	}{
		{"written twice", Program{Ops: []Op{{Out: "a", Size: 1}, {Out: "a", Size: 1}}}, `"a" is written by op 0 and op 1`},
		{"read before written", Program{Ops: []Op{{Out: "a", Size: 1, In: []string{"b"}}, {Out: "b", Size: 1}}}, `reads "b" before op 1`},
		{"unknown output", Program{Ops: []Op{{Out: "a", Size: 1}}, Outputs: []string{"zz"}}, `output "zz"`},
		{"donated non-input", Program{Ops: []Op{{Out: "a", Size: 1}}, Donated: []string{"a"}}, `donated "a" is not an input`},
		{"zero size", Program{Ops: []Op{{Out: "a"}}}, `"a" has size 0`},
		{"view of a weight", Program{Ops: []Op{{Fn: "reshape", Out: "v", In: []string{"W"}, View: true}}}, `view of "W", which the program does not write`},
		{"view of nothing", Program{Ops: []Op{{Fn: "reshape", Out: "v", View: true}}}, "view of nothing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.p.Problem(1)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Problem() = %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
}

func TestLowerErrors(t *testing.T) {
	tests := []struct {
		name  string
		temps []Temp
		align int64
		want  string
	}{
		{"alignment 0", ABC(false), 0, "alignment 0"},
		{"alignment 24", ABC(false), 24, "alignment 24"},
		{"temp alignment 3", []Temp{{Name: "a", Size: 1, Align: 3}}, 1, `"a" has alignment 3`},
		{"last before first", []Temp{{Name: "a", Size: 1, First: 2, Last: 1}}, 1, "last read at step 1, before it is written at step 2"},
		{"negative size", []Temp{{Name: "a", Size: -1}}, 1, `"a" has size -1`},
		{"duplicate", []Temp{{Name: "a", Size: 1}, {Name: "a", Size: 1}}, 1, `"a" defined twice`},
		{"alias of nothing", []Temp{{Name: "v", Kind: Alias, Of: "w"}}, 1, `views "w", which is not defined`},
		{"alias cycle", []Temp{{Name: "v", Kind: Alias, Of: "w"}, {Name: "w", Kind: Alias, Of: "v"}}, 1, "cycle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Lower(tc.temps, tc.align); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Lower = %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
	// Per-temp alignment raises the problem's.
	p, err := Lower([]Temp{{Name: "a", Size: 10, Align: 256}}, 16)
	if err != nil || p.Alignment != 256 || p.SizeOf(0) != 256 {
		t.Errorf("Lower with Align 256 = %+v, %v; want alignment 256, size 256", p, err)
	}
}

// TestUnplannedOps: an op that allocates its own output gets no buffer,
// but its reads keep its inputs alive, and nothing may be written over it.
func TestUnplannedOps(t *testing.T) {
	prog := Program{Ops: []Op{
		{Fn: "matmul", Out: "a", Size: 64},
		{Fn: "sum", Out: "s", Size: 4, In: []string{"a"}, Unplanned: true},
		{Fn: "scale", Out: "b", Size: 64, In: []string{"a", "s"}},
		{Fn: "gelu", Out: "c", Size: 64, In: []string{"s"}},
	}, Outputs: []string{"b", "c"}}
	pr, _, err := prog.Problem(1)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, b := range pr.Buffers {
		ids = append(ids, b.ID)
	}
	if strings.Join(ids, ",") != "a,b,c" {
		t.Fatalf("buffers %v, want a, b, c (no buffer for the unplanned s)", ids)
	}
	if pr.Buffers[0].End != 3 {
		t.Errorf("a lives over [%d, %d), want it alive through its read by op 2", pr.Buffers[0].Start, pr.Buffers[0].End)
	}
	if err := prog.Legal(3, "s"); !errors.Is(err, ErrRefused) {
		t.Errorf("Legal(gelu over the unplanned s) = %v, want a refusal", err)
	}
	prog.Ops = append(prog.Ops, Op{Fn: "reshape", Out: "v", In: []string{"s"}, View: true})
	if _, err := prog.Temps(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a view of an unplanned value: Temps() = %v, want ErrInvalid", err)
	}
}
