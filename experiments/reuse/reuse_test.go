package reuse

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/planner"
)

func runReuseForTest(t *testing.T, sets ...string) (*reuseConfig, error) {
	t.Helper()
	l := Lab
	cfg, err := l.Config(true, sets)
	if err != nil {
		return nil, err
	}
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		return nil, err
	}
	labtest.ChecksHold(t, r, "")
	if len(r.Checks) < 10 {
		t.Errorf("only %d checks", len(r.Checks))
	}
	want := map[string]float64{"touching_peak_bytes": 180, "touching_inclusive_bug_bytes": 240}
	if len(sets) == 0 {
		want["independent_bytes"], want["planned_peak_bytes"] = 2304, 1536
		want["chain_reuse_bytes"], want["chain_inplace_bytes"] = 192<<20, 128<<20
	}
	for k, v := range want {
		if got, ok := r.Metrics.Get(k); !ok || labtest.Float(got) != v {
			t.Errorf("metric %s = %v, want %v", k, got, v)
		}
	}
	if len(r.FigureList()) != 2 {
		t.Errorf("%d figures, want the naive and planned timelines", len(r.FigureList()))
	}
	return cfg.(*reuseConfig), nil
}

func TestReuseLab(t *testing.T) {
	cfg, err := runReuseForTest(t)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seeds != 5 || cfg.RandomN != 60 {
		t.Errorf("--quick ran seeds=%d random-n=%d, want 5 and 60", cfg.Seeds, cfg.RandomN)
	}
}

// TestReuseLabAligned: with an alignment that rounds the examples' sizes,
// the chapter's unaligned figures are compared with the bound instead, and
// every check still holds.
func TestReuseLabAligned(t *testing.T) {
	if _, err := runReuseForTest(t, "alignment=4096", "algos=best-fit,greedy-by-size", "scale-n=0"); err != nil {
		t.Fatal(err)
	}
}

func TestReuseLabInstances(t *testing.T) {
	if _, err := runReuseForTest(t, "instances=../../planner/testdata", "algos=best-fit,greedy-by-size", "scale-n=0"); err != nil {
		t.Fatal(err)
	}
}

func TestReuseBadConfig(t *testing.T) {
	tests := []struct {
		set, want string
	}{
		{"alignment=48", "alignment=48"},
		{"alignment=0", "alignment=0"},
		{"algos=nope", "nope"},
		{"seeds=0", "seeds=0"},
		{"random-n=-1", "random-n=-1"},
		{"scale-n=-5", "scale-n=-5"},
		{"instances=/no/such/dir", "/no/such/dir"},
	}
	for _, tc := range tests {
		t.Run(tc.set, func(t *testing.T) {
			l := Lab
			cfg, err := l.Config(true, []string{tc.set})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Run(context.Background(), cfg, lab.Options{})
			if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("run reuse --set %s = %v, want a usage error naming %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestReuseRejectsBadPlan: a planner with an overlap bug makes the lab's
// planning step fail with an error, not a report.
func TestReuseRejectsBadPlan(t *testing.T) {
	bf, _ := planner.Lookup("best-fit")
	buggy := planner.Algorithm{Name: "buggy", Place: func(ctx context.Context, p planner.Problem) (planner.Plan, error) {
		pl, err := bf.Place(ctx, p)
		pl.Offsets[1] = pl.Offsets[0] // a and b are live together at kernel 1
		return pl, err
	}}
	p, err := planner.Lower(planner.ABC(false), 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reusePlanAll(context.Background(), "a/b/c", p, []planner.Algorithm{bf, buggy}); !errors.Is(err, planner.ErrBadPlan) || !strings.Contains(err.Error(), "buggy") {
		t.Errorf("reusePlanAll with a buggy planner = %v, want ErrBadPlan naming it", err)
	}
	if _, err := reusePlanAll(context.Background(), "a/b/c", p, []planner.Algorithm{bf}); err != nil {
		t.Errorf("reusePlanAll(best-fit) = %v", err)
	}
}

// TestReuseLabFindsMiniMalloc: by default the lab plans the instances in
// the shared directory's data/minimalloc and counts those the search fits
// in the capacity their names give; a capacity below the lower bound is a
// failed check (the negative control); without the directory the lab says
// so in a note and reports the counts as not measured.
func TestReuseLabFindsMiniMalloc(t *testing.T) {
	example, err := os.ReadFile("../../planner/testdata/example.csv")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		files     []string // instance files under data/minimalloc; nil: no such directory
		fit, pass bool
	}{
		{"fits", []string{"ex.1600.csv", "ex2.4096.csv"}, true, true},
		{"capacity below the bound", []string{"ex.1600.csv", "ex2.1599.csv"}, false, false},
		{"absent", nil, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shared := t.TempDir()
			for _, f := range tc.files {
				dir := filepath.Join(shared, "data", "minimalloc")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), example, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("GPTLAB_SHARED_DIR", shared)
			cfg, err := Lab.Config(true, []string{"scale-n=0", "algos=best-fit,search"})
			if err != nil {
				t.Fatal(err)
			}
			r, err := Lab.Run(context.Background(), cfg, lab.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			n, measured := r.Metrics.Float("minimalloc_instances")
			fit, _ := r.Metrics.Float("minimalloc_fit")
			if tc.files == nil {
				if measured || !strings.Contains(strings.Join(r.Notes, " "), "data/minimalloc") {
					t.Errorf("absent: minimalloc_instances %v measured, notes %q", n, r.Notes)
				}
				return
			}
			if n != float64(len(tc.files)) || (fit == n) != tc.fit {
				t.Errorf("minimalloc_instances %v, minimalloc_fit %v, want %d and all fit: %v", n, fit, len(tc.files), tc.fit)
			}
			found := false
			for _, c := range r.Checks {
				if strings.HasPrefix(c.Name, "search, given each instance's capacity") {
					found = true
					if c.Pass != tc.pass {
						t.Errorf("check %q pass %v, want %v: %s", c.Name, c.Pass, tc.pass, c.Detail)
					}
				}
			}
			if !found {
				t.Error("no check on the instances")
			}
		})
	}
}
