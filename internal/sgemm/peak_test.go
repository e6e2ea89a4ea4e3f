package sgemm

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"gptlab/internal/testutil"
)

// TestPeakLoops: every kernel's peak loop runs (0 trips and a few) and
// says what it is, and the microkernel loop that stands in where a kernel
// has no FMA loop counts 2·mr·nr·k FLOPs a trip.
func TestPeakLoops(t *testing.T) {
	for _, kn := range kernels {
		run, flops, what := peakLoop(kn)
		run(0)
		run(3)
		if flops <= 0 || what == "" {
			t.Errorf("%s: peak loop of %v FLOPs a trip, named %q", kn.name, flops, what)
		}
		noLoop := *kn
		noLoop.fmaLoop = nil
		run, flops, _ = peakLoop(&noLoop)
		run(1)
		if want := float64(2 * kn.mr * kn.nr * 64); flops != want {
			t.Errorf("%s microkernel: %v FLOPs a trip, want %v", kn.name, flops, want)
		}
	}
	if g, what := Peak(2, 5*time.Millisecond); !(g > 0) || what == "" {
		t.Errorf("Peak = %v GFLOP/s (%q), want a rate", g, what)
	}
}

// BenchmarkPeak: the peak loop on one thread and on GOMAXPROCS.
func BenchmarkPeak(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, th := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			var g float64
			var what string
			for b.Loop() {
				g, what = Peak(th, 100*time.Millisecond)
			}
			b.ReportMetric(g, "GFLOP/s")
			b.Logf("%s", what)
		})
	}
}
