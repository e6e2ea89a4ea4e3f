package serving

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParseLengths(t *testing.T) {
	good := []struct {
		spec string
		want Lengths
	}{
		{"fixed:128", Lengths{Kind: FixedLength, Lo: 128, Hi: 128}},
		{"uniform:32:512", Lengths{Kind: UniformLength, Lo: 32, Hi: 512}},
		{"lognormal:128:1:1024", Lengths{Kind: LogNormalLength, Lo: 1, Hi: 1024, Median: 128, Sigma: 1}},
		{"zipf:1.5:16:2048", Lengths{Kind: ZipfLength, Lo: 16, Hi: 2048, S: 1.5}},
	}
	for _, tc := range good {
		got, err := ParseLengths(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("ParseLengths(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
		if got.String() != tc.spec {
			t.Errorf("%+v prints as %q, want %q", got, got.String(), tc.spec)
		}
	}
	for _, spec := range []string{"", "fixed", "fixed:0", "fixed:1.5", "uniform:9:3", "uniform:1", "lognormal:0:1:10",
		"lognormal:10:-1:10", "zipf:1:1:10", "zipf:2:0:10", "poisson:3", "fixed:NaN", "fixed:2000000"} {
		if _, err := ParseLengths(spec); err == nil {
			t.Errorf("ParseLengths(%q) accepted", spec)
		}
	}
}

func FuzzParseLengths(f *testing.F) {
	for _, s := range []string{"fixed:128", "uniform:32:512", "lognormal:128:1:1024", "zipf:1.5:16:2048", "zipf:1e300:1:2", "uniform:-1:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		l, err := ParseLengths(spec)
		if err != nil {
			return
		}
		back, err := ParseLengths(l.String())
		if err != nil || back != l {
			t.Fatalf("%q → %+v → %q → %+v, %v", spec, l, l.String(), back, err)
		}
		draw := l.sampler(newRand(1))
		for range 20 {
			if n := draw(); n < l.Lo || n > l.Hi {
				t.Fatalf("%s drew %d outside [%d, %d]", spec, n, l.Lo, l.Hi)
			}
		}
	})
}

func TestGenerateIsReproducibleAndCapped(t *testing.T) {
	p, _ := ParseLengths("zipf:1.2:8:300")
	o, _ := ParseLengths("lognormal:100:1.5:400")
	w := Workload{N: 20000, Rate: 4, CV: 3, Prompt: p, Output: o, Groups: 5, PrefixLen: 30, CancelFrac: 0.2, CancelAfter: 2, Seed: 9}
	a, err := w.Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := w.Generate()
	if !slices.EqualFunc(a, b, func(x, y Request) bool {
		return x.Arrival == y.Arrival && x.Prompt == y.Prompt && x.Output == y.Output && x.Cancel == y.Cancel && x.Group == y.Group
	}) {
		t.Fatal("same seed, different requests")
	}
	var gaps []float64
	cancels := 0
	groups := map[int]int{}
	for i, r := range a {
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		if r.Prompt < 30+8 || r.Prompt > 30+300 || r.Output < 1 || r.Output > 400 {
			t.Fatalf("request %d: prompt %d, output %d outside the caps", i, r.Prompt, r.Output)
		}
		if i > 0 {
			gaps = append(gaps, r.Arrival-a[i-1].Arrival)
		}
		if r.Cancels() {
			cancels++
		}
		groups[r.Group]++
	}
	mean := naiveMean(gaps)
	var ss float64
	for _, g := range gaps {
		ss += (g - mean) * (g - mean)
	}
	cv := math.Sqrt(ss/float64(len(gaps))) / mean
	// 20000 gamma gaps: the mean within 5% of 1/rate, the CV within 10%.
	if math.Abs(mean-0.25) > 0.05*0.25 || math.Abs(cv-3) > 0.3 {
		t.Fatalf("gaps: mean %.4f s (want 0.25), CV %.3f (want 3)", mean, cv)
	}
	if f := float64(cancels) / float64(len(a)); math.Abs(f-0.2) > 0.02 {
		t.Fatalf("%.3f of requests cancel, want 0.2", f)
	}
	if len(groups) != 5 {
		t.Fatalf("groups used: %v, want 5", groups)
	}
	// Changing the output lengths leaves the arrivals alone.
	w.Output, _ = ParseLengths("fixed:7")
	c, _ := w.Generate()
	if c[100].Arrival != a[100].Arrival || c[100].Output != 7 {
		t.Fatal("arrivals depend on the output lengths")
	}
}

func TestGenerateRejectsBadWorkloads(t *testing.T) {
	l, _ := ParseLengths("fixed:4")
	for _, w := range []Workload{
		{N: -1, Prompt: l, Output: l},
		{N: 1, Rate: -2, Prompt: l, Output: l},
		{N: 1, Groups: 2, Prompt: l, Output: l},
		{N: 1, CancelFrac: 0.5, Prompt: l, Output: l},
		{N: 1, Prompt: Lengths{}, Output: l},
	} {
		if _, err := w.Generate(); err == nil {
			t.Errorf("Generate(%+v) accepted", w)
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }
