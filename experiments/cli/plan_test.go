package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/planner"
)

const planExample = "../../planner/testdata/example.csv"

func TestPlanCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "solution.csv")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plan", planExample, "--algo", "best-fit", "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("gptlab plan = exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"peak:", "lower bound: 1600 bytes", "peak/bound:", "time:", "verified:    yes"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs, offs, err := planner.ReadCSV(f)
	if err != nil || offs == nil {
		t.Fatalf("solution: %v (offsets %v)", err, offs)
	}
	p := planner.Problem{Buffers: bufs, Alignment: 1}
	if err := planner.Check(p, planner.Plan{Offsets: offs, Peak: p.PeakOf(offs)}); err != nil {
		t.Errorf("written solution fails verification: %v", err)
	}
	// Feeding the solution back checks its offsets too.
	stdout.Reset()
	if code := Main([]string{"plan", out}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "file offsets: peak") {
		t.Errorf("gptlab plan SOLUTION = exit %d, output %q", code, stdout.String())
	}
}

func TestPlanBadOffsetsReported(t *testing.T) {
	in := filepath.Join(t.TempDir(), "given.csv")
	os.WriteFile(in, []byte("id,lower,upper,size,offset\na,0,2,8,0\nb,1,3,8,4\n"), 0o644)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"plan", in, "--algo", "greedy-by-size"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), `REJECTED`) {
		t.Errorf("plan of overlapping given offsets = exit %d, output %q", code, stdout.String())
	}
}

func TestPlanBadUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,lower,upper,size\na,0,2,5\nb,0,2,0\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"plan"}, "no input file"},
		{"two files", []string{"plan", planExample, planExample}, "one input file"},
		{"unknown flag", []string{"plan", planExample, "--bogus"}, "-bogus"},
		{"unknown planner", []string{"plan", planExample, "--algo", "nope"}, "--algo nope"},
		{"missing file", []string{"plan", filepath.Join(dir, "absent.csv")}, "absent.csv"},
		{"bad row", []string{"plan", bad}, `line 3: size "0"`},
		{"unwritable out", []string{"plan", planExample, "--out", filepath.Join(dir, "no", "dir", "x.csv")}, "--out"},
		{"negative capacity", []string{"plan", planExample, "--capacity", "-1"}, "--capacity -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runCmd("plan", tc.args[1:]...)
			if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan %q = %v, want a usage error with %q", tc.args[1:], err, tc.want)
			}
			var stderr bytes.Buffer
			if code := Main(tc.args, &bytes.Buffer{}, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want 2 and one line", code, stderr.String())
			}
		})
	}
}

// TestPlanCapacity: a capacity the plan fits passes; one below the lower
// bound cannot be met by any planner and is a failed check (exit 1). A
// MiniMalloc file name gives the capacity when no flag does.
func TestPlanCapacity(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"fits", []string{"plan", planExample, "--algo", "search", "--capacity", "1600"}, 0, "fits"},
		{"below the bound", []string{"plan", planExample, "--algo", "search", "--capacity", "1000"}, 1, "DOES NOT FIT"},
		{"greedy checked too", []string{"plan", planExample, "--algo", "greedy-by-size", "--capacity", "1000"}, 1, "DOES NOT FIT"},
	}
	dir := t.TempDir()
	named := filepath.Join(dir, "X.1000.csv")
	b, err := os.ReadFile(planExample)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(named, b, 0o644)
	tests = append(tests, struct {
		name   string
		args   []string
		status int
		want   string
	}{"from the file name", []string{"plan", named}, 1, "from the file name): DOES NOT FIT"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(tc.args, &out, &errb); code != tc.status || !strings.Contains(out.String(), tc.want) {
				t.Errorf("Main(%q) = %d, stdout %q; want %d and %q", tc.args, code, out.String(), tc.status, tc.want)
			}
		})
	}
}

// TestPlanAuto: the default planner keeps the lowest verified plan and
// says which planner made it and what the others did; out of time it
// still returns best-fit's plan, never an error.
func TestPlanAuto(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"default", []string{"plan", planExample}, []string{"(auto: the lowest verified plan within 10s)", "tried:", "search 1600 bytes", "peak:        1600 bytes"}},
		{"no time left", []string{"plan", planExample, "--time-limit", "1ns"}, []string{"planner:     best-fit (auto", "greedy-by-size not run: no time left", "verified:    yes"}},
	} {
		t.Run(tc.name, func(t *testing.T) { mainSays(t, tc.args, tc.want...) })
	}
}

// TestPlanMillionBuffers: a million buffers, too many for the search and
// for greedy-by-size within the time limit, still get a verified plan
// (exit 0) from the default planner, which says which planner made it.
func TestPlanMillionBuffers(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a million buffers: about 10 s")
	}
	path := filepath.Join(t.TempDir(), "million.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := planner.WriteCSV(f, planner.Random(7, planner.ScaleSpec(1_000_000)), nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	code, out, errs := runMain("plan", path, "--time-limit", "2s")
	if code != 0 || !strings.Contains(out, "(1000000 buffers)") || !strings.Contains(out, "verified:    yes") ||
		!strings.Contains(out, "planner:     best-fit (auto") {
		t.Fatalf("plan of a million buffers = %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	t.Logf("\n%s", out)
}

// TestPlanTooLarge: a file beyond the size limits, and a plan whose arena
// is too large to verify by simulation, are bad input (exit 2), not a
// failed check or a crash.
func TestPlanTooLarge(t *testing.T) {
	dir := t.TempDir()
	unverifiable := filepath.Join(dir, "unverifiable.csv")
	// 2^40-1 and 3 bytes live together: the arena is 2^40+2 bytes with no
	// common unit, beyond what the simulator executes.
	os.WriteFile(unverifiable, []byte("id,lower,upper,size\na,0,1,1099511627775\nb,0,1,3\n"), 0o644)
	bytes0, buffers0 := maxPlanFileBytes, maxPlanBuffers
	defer func() { maxPlanFileBytes, maxPlanBuffers = bytes0, buffers0 }()
	for _, tc := range []struct {
		name  string
		args  []string
		limit func()
		want  string
	}{
		{"too many bytes", []string{"plan", planExample}, func() { maxPlanFileBytes = 10 }, "more than the 10"},
		{"too many buffers", []string{"plan", planExample}, func() { maxPlanBuffers = 3 }, "4 buffers, more than the 3"},
		{"cannot be verified", []string{"plan", unverifiable, "--algo", "best-fit"}, func() {}, "cannot be verified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.limit()
			code, _, errs := runMain(tc.args...)
			if code != 2 || !strings.Contains(errs, tc.want) {
				t.Errorf("Main(%q) = %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
			}
			maxPlanFileBytes, maxPlanBuffers = bytes0, buffers0
		})
	}
}
