package engine

import (
	"context"
	"slices"
	"testing"

	"gptlab/serving"
)

// TestReplay serves a generated workload on the wall clock: every request
// completes with its output length, the recorder agrees, and every
// iteration is measured.
func TestReplay(t *testing.T) {
	f := newFixture(t, "small")
	e, err := New(f.p, Config{BlockSize: 8, Blocks: 64, Caching: true, Policy: "continuous", MaxSeqs: 8, MaxTokens: 32, Chunked: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := serving.ParseLengths("uniform:2:20")
	o, _ := serving.ParseLengths("uniform:2:20")
	reqs, err := serving.Workload{N: 30, Rate: 2000, Prompt: p, Output: o, Groups: 2, PrefixLen: 8, Seed: 1}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Replay(context.Background(), e, reqs)
	if err != nil {
		t.Fatal(err)
	}
	sum := res.Rec.Summary(serving.SLO{})
	var out int64
	for _, r := range reqs {
		out += int64(r.Output)
	}
	if sum.Completed != len(reqs) || sum.OutputTokens != out {
		t.Fatalf("%d of %d completed, %d of %d tokens", sum.Completed, len(reqs), sum.OutputTokens, out)
	}
	if int64(len(res.Iters)) != e.counts.iterations || sum.TTFT.Median <= 0 || sum.E2E.P90 < sum.TTFT.Median {
		t.Fatalf("%d iterations measured of %d; TTFT %+v, E2E %+v", len(res.Iters), e.counts.iterations, sum.TTFT, sum.E2E)
	}
	// The rate keeps the engine busy for a while: gaps between iterations.
	// Whether the first arrival finds it idle depends on the machine's
	// speed (emulated, the set-up outlasts it): wakes only need be sane.
	if slices.ContainsFunc(res.Wake, func(w float64) bool { return w < 0 }) || len(res.Gaps) == 0 || slices.Min(res.Gaps) < 0 {
		t.Fatalf("wakes %v, %d gaps", res.Wake, len(res.Gaps))
	}
	// A request that arrives after the one before it has completed finds
	// the engine idle: the replay waits for it and records the wake. The
	// first makes two tokens and the second comes a second later: at 0.3 s
	// after a longer first request, under the load of a whole go test run
	// in CI, the first had not completed and no wake was recorded.
	late := slices.Clone(reqs[:2])
	late[0].Output = 2
	late[0].Arrival, late[1].Arrival = 0, 1
	res2, err := Replay(context.Background(), e, late)
	if err != nil {
		t.Fatal(err)
	}
	if len(res2.Wake) == 0 || slices.Min(res2.Wake) < 0 {
		t.Fatalf("a request 1 s after a two-token one: wakes %v, want one at least", res2.Wake)
	}
	if e.blocks.Stats().HitTokens == 0 {
		t.Fatal("the shared prefixes were never found in the cache")
	}
	checkFree(t, e)
}
