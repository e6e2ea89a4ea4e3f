package sgemm

import (
	"runtime"
	"sync"
	"time"
)

// Peak measures this machine's float32 multiply-add rate as Sgemm's
// kernel sees it: threads goroutines, each locked to an OS thread, run
// at once for about d each the FMA loop of the active kernel's vectors
// (twelve independent FMAs a trip on registers alone, so bound by the FMA
// ports' throughput, not their latency nor memory). Where the kernel has
// no such loop (NEON, the Go kernel) they run the microkernel itself on
// panels that stay in L1. It returns GFLOP/s summed over the goroutines
// (an FMA lane counts 2) and what ran ("avx512 FMA loop", "neon
// microkernel in L1").
func Peak(threads int, d time.Duration) (gflops float64, what string) {
	kn := active.Load()
	run, flops, what := peakLoop(kn)
	threads = max(threads, 1)
	rates := make([]float64, threads)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for g := range threads {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			run(1) // page in, warm up
			ready.Done()
			<-start
			trips, n := 0, 1
			t0 := time.Now()
			for time.Since(t0) < d {
				run(n)
				trips += n
				n = min(2*n, 1<<16)
			}
			rates[g] = float64(trips) * flops / time.Since(t0).Seconds()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for _, r := range rates {
		gflops += r / 1e9
	}
	return gflops, what
}

// peakLoop returns Peak's loop for kernel kn: run(n) does n trips of flops
// floating-point operations.
func peakLoop(kn *kernel) (run func(n int), flops float64, what string) {
	if kn.fmaLoop != nil {
		return kn.fmaLoop, float64(kn.fmaFlops), kn.name + " FMA loop"
	}
	const k = 64 // an A and a B panel of 64 depths: 2 KiB each for NEON
	a := make([]float32, kn.mr*k)
	b := make([]float32, kn.nr*k)
	c := make([]float32, kn.mr*kn.nr)
	for i := range a {
		a[i] = 1
	}
	for i := range b {
		b[i] = 1
	}
	run = func(n int) {
		for range n {
			kn.packed(k, &a[0], 0, &b[0], &c[0], kn.nr, 1, false)
		}
	}
	return run, float64(2 * kn.mr * kn.nr * k), kn.name + " microkernel in L1"
}
