package serving

import (
	"context"
	"errors"
	"math"
	"sort"
	"testing"
)

// variants are the schedulers the simulator tests run, over fresh blocks.
var variants = []struct {
	name string
	make func(t testing.TB) Scheduler
}{
	{"fixed", func(t testing.TB) Scheduler {
		f, _ := NewFixed(mustBlocks(t, BlockConfig{Size: 16, Device: 512, Caching: true}), 16)
		return f
	}},
	{"continuous", func(t testing.TB) Scheduler {
		c, _ := NewContinuous(mustBlocks(t, BlockConfig{Size: 16, Device: 256, Caching: true}), DefaultContinuous)
		return c
	}},
	{"chunked", func(t testing.TB) Scheduler {
		cfg := DefaultContinuous
		cfg.Chunked, cfg.MaxTokens = true, 128
		c, _ := NewContinuous(mustBlocks(t, BlockConfig{Size: 16, Device: 256, Caching: true}), cfg)
		return c
	}},
	{"swap", func(t testing.TB) Scheduler {
		cfg := DefaultContinuous
		cfg.Swap = true
		c, _ := NewContinuous(mustBlocks(t, BlockConfig{Size: 16, Device: 256, Host: 64}), cfg)
		return c
	}},
	{"contiguous", func(t testing.TB) Scheduler {
		m, _ := Contiguous(2048, 16*512, 0)
		c, _ := NewContinuous(m, DefaultContinuous)
		return c
	}},
}

func mustBlocks(t testing.TB, cfg BlockConfig) *Blocks {
	m, err := NewBlocks(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testWorkload(t testing.TB, n int, rate float64, groups int) []Request {
	p, _ := ParseLengths("lognormal:96:1:512")
	o, _ := ParseLengths("lognormal:64:1:512")
	w := Workload{N: n, Rate: rate, Prompt: p, Output: o, Seed: 7, CancelFrac: 0.1, CancelAfter: 3}
	if groups > 0 {
		w.Groups, w.PrefixLen = groups, 40
	}
	reqs, err := w.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// TestSimulateHoldsInvariants runs every scheduler under load with the
// invariant checker after every iteration, and accounts for every request.
func TestSimulateHoldsInvariants(t *testing.T) {
	reqs := testWorkload(t, 150, 12, 3)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			res, err := Simulate(context.Background(), reqs, v.make(t), SimConfig{Cost: DefaultCost, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Rec.Summary(SLO{})
			if s.Completed+s.Cancelled+s.Rejected != len(reqs) || s.Completed == 0 {
				t.Fatalf("%d completed + %d cancelled + %d rejected ≠ %d requests", s.Completed, s.Cancelled, s.Rejected, len(reqs))
			}
			if res.Checks < int(res.Sched.Iterations) {
				t.Fatalf("%d checks for %d iterations", res.Checks, res.Sched.Iterations)
			}
			if res.Waste < 0 || res.Waste >= 1 || res.KVUsed <= 0 || res.KVUsed > res.KVPeak || res.KVPeak > 1 {
				t.Fatalf("waste %g, used %g, peak %g out of range", res.Waste, res.KVUsed, res.KVPeak)
			}
		})
	}
}

func TestSimulateIsDeterministic(t *testing.T) {
	reqs := testWorkload(t, 200, 10, 2)
	var first Summary
	for i := range 2 {
		res, err := Simulate(context.Background(), reqs, variants[1].make(t), SimConfig{Cost: DefaultCost})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Rec.Summary(SLO{TTFT: 1, TPOT: 0.05})
		if i == 1 && s != first {
			t.Fatalf("same inputs, different metrics:\n%+v\n%+v", first, s)
		}
		first = s
	}
}

func TestSimulateStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Simulate(ctx, testWorkload(t, 50, 5, 0), variants[1].make(t), SimConfig{Cost: DefaultCost})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

// TestMetricsMatchVLLMDefinitions recomputes vLLM's calculate_metrics
// naively from the timeline — each completed request's token times, the
// way benchmark_serving.py's client sees them — and compares.
func TestMetricsMatchVLLMDefinitions(t *testing.T) {
	reqs := testWorkload(t, 120, 14, 0)
	res, err := Simulate(context.Background(), reqs, variants[3].make(t), SimConfig{Cost: DefaultCost, Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sched.Preemptions == 0 {
		t.Fatal("the workload should preempt, so gaps longer than one iteration occur")
	}
	times := map[int][]float64{}
	done := map[int]bool{}
	for _, it := range res.Timeline {
		for _, e := range it.Entries {
			if e.Sample {
				times[e.Req] = append(times[e.Req], it.End)
			}
		}
		for _, id := range it.Finished {
			done[id] = true
		}
	}
	var ttft, tpot, itl, e2e []float64
	first, last := math.Inf(1), 0.0
	var out int64
	good := 0
	slo := SLO{TTFT: 0.5, TPOT: 0.04}
	for i, r := range reqs {
		first = min(first, r.Arrival)
		if !done[i] {
			continue
		}
		ts := times[i]
		// A cancelled request's last token is not its end; only completed ones count.
		a, b := ts[0]-r.Arrival, ts[len(ts)-1]-r.Arrival
		ttft, e2e = append(ttft, a), append(e2e, b)
		tp := 0.0
		if len(ts) > 1 {
			tp = (b - a) / float64(len(ts)-1)
			tpot = append(tpot, tp)
		}
		for k := 1; k < len(ts); k++ {
			itl = append(itl, ts[k]-ts[k-1])
		}
		out += int64(len(ts))
		if a <= slo.TTFT && tp <= slo.TPOT {
			good++
		}
	}
	for i := range reqs {
		if done[i] {
			last = max(last, times[i][len(times[i])-1])
		}
	}
	for _, r := range reqs {
		if r.Cancels() && !done[r.ID] {
			last = max(last, r.Cancel)
		}
	}
	s := res.Rec.Summary(slo)
	dur := last - first
	close := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*max(1, math.Abs(want)) {
			t.Errorf("%s = %.12g, want %.12g", name, got, want)
		}
	}
	close("duration", s.Duration, dur)
	close("request throughput", s.RequestThroughput, float64(len(ttft))/dur)
	close("output throughput", s.OutputThroughput, float64(out)/dur)
	close("goodput", s.Goodput, float64(good)/dur)
	for _, d := range []struct {
		name string
		got  Dist
		x    []float64
	}{{"TTFT", s.TTFT, ttft}, {"TPOT", s.TPOT, tpot}, {"ITL", s.ITL, itl}, {"E2E", s.E2E, e2e}} {
		if d.got.N != len(d.x) {
			t.Errorf("%s: %d values, want %d", d.name, d.got.N, len(d.x))
			continue
		}
		close(d.name+" mean", d.got.Mean, naiveMean(d.x))
		close(d.name+" median", d.got.Median, naivePercentile(d.x, 50))
		close(d.name+" p90", d.got.P90, naivePercentile(d.x, 90))
		close(d.name+" p99", d.got.P99, naivePercentile(d.x, 99))
	}
}

func naiveMean(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// naivePercentile is numpy.percentile's default (linear) method.
func naivePercentile(x []float64, p float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	h := float64(len(y)-1) * p / 100
	lo := int(h)
	if lo+1 >= len(y) {
		return y[lo]
	}
	return y[lo] + (h-float64(lo))*(y[lo+1]-y[lo])
}

// FuzzScheduler drives small random workloads through every scheduler
// with random budgets, checking the invariants after every iteration.
func FuzzScheduler(f *testing.F) {
	f.Add(uint64(1), uint8(20), uint8(8), uint8(4), uint8(30), uint8(3))
	f.Add(uint64(2), uint8(40), uint8(3), uint8(2), uint8(200), uint8(0))
	f.Add(uint64(3), uint8(10), uint8(16), uint8(7), uint8(5), uint8(9))
	f.Fuzz(func(t *testing.T, seed uint64, n, blocks, size, rate, groups uint8) {
		bs := 1 + int(size%8)
		dev := 2 + int(blocks%24)
		w := Workload{N: 1 + int(n%40), Rate: 1 + float64(rate), CV: 1 + float64(seed%3),
			Prompt: Lengths{Kind: UniformLength, Lo: 1, Hi: 3 * bs}, Output: Lengths{Kind: UniformLength, Lo: 1, Hi: 2 * bs},
			Groups: int(groups % 4), CancelFrac: 0.3, CancelAfter: 0.5, Seed: seed}
		if w.Groups > 0 {
			w.PrefixLen = 1 + int(groups)%(2*bs)
		}
		reqs, err := w.Generate()
		if err != nil {
			t.Fatal(err)
		}
		cfgs := []ContinuousConfig{
			{MaxSeqs: 1 + int(n%5), MaxTokens: 4 * bs},
			{MaxSeqs: 8, MaxTokens: 1 + int(seed%7), Chunked: true},
			{MaxSeqs: 8, MaxTokens: 8 * bs, Swap: true, Watermark: 0.1},
		}
		for i, cfg := range cfgs {
			host := 0
			if cfg.Swap {
				host = dev / 2
				if host == 0 {
					cfg.Swap = false
				}
			}
			m, _ := NewBlocks(BlockConfig{Size: bs, Device: dev, Host: host, Caching: i != 1})
			c, err := NewContinuous(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			simulateChecked(t, reqs, c)
		}
		m, _ := NewBlocks(BlockConfig{Size: bs, Device: dev, Caching: true})
		fx, _ := NewFixed(m, 1+int(blocks%6))
		simulateChecked(t, reqs, fx)
	})
}

func simulateChecked(t *testing.T, reqs []Request, s Scheduler) {
	t.Helper()
	res, err := Simulate(context.Background(), reqs, s, SimConfig{Cost: Cost{Overhead: 1e-3, PrefillToken: 1e-4, DecodeToken: 1e-4, SwapBlock: 1e-4}, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := res.Rec.Summary(SLO{})
	if sum.Completed+sum.Cancelled+sum.Rejected != len(reqs) {
		t.Fatalf("%+v: requests unaccounted for", sum)
	}
}
