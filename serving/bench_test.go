package serving

import (
	"context"
	"fmt"
	"testing"

	"gptlab/internal/testutil"
)

// benchWorkload is the benchmark's traffic: ShareGPT-like long-tailed
// lengths at a rate the server sustains.
func benchWorkload(n int) Workload {
	p, _ := ParseLengths("lognormal:128:1:1024")
	return Workload{N: n, Rate: 10, Prompt: p, Output: p, Seed: 1}
}

// BenchmarkSimulate measures the simulator's cost per run at 10^4, 10^5
// and 10^6 requests: linear cost means a tenfold time per tenfold size.
func BenchmarkSimulate(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			reqs, err := benchWorkload(n).Generate()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				m, _ := NewBlocks(BlockConfig{Size: 16, Device: 4096, Caching: true})
				s, _ := NewContinuous(m, DefaultContinuous)
				res, err := Simulate(context.Background(), reqs, s, SimConfig{Cost: DefaultCost})
				if err != nil {
					b.Fatal(err)
				}
				_ = res.Rec.Summary(SLO{})
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
