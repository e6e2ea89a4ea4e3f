package cputime

import (
	"fmt"
	"testing"
	"time"
)

// TestProcessCountsWorkNotWaiting: spinning adds about its wall time of
// CPU time; sleeping as long adds almost none (the negative control that
// tells CPU time from a clock).
func TestProcessCountsWorkNotWaiting(t *testing.T) {
	t0, ok := Process()
	if !ok {
		t.Skip("this platform gives no process CPU time")
	}
	end := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	t1, _ := Process()
	time.Sleep(200 * time.Millisecond)
	t2, _ := Process()
	spun, slept := t1-t0, t2-t1
	// A loaded machine may give the spin less than its wall time; it still
	// gets some, and far more than the sleep.
	if spun <= 0 || spun > 2*time.Second || slept > spun/2 || x == 0 {
		t.Errorf("CPU time: %v spinning 200 ms, %v sleeping 200 ms", spun, slept)
	}
}

func ExampleProcess() {
	before, _ := Process()
	sum := 0
	for i := range 1_000_000 {
		sum += i
	}
	after, _ := Process()
	fmt.Println("the loop's CPU time is never negative:", after-before >= 0, sum > 0)
	// Output: the loop's CPU time is never negative: true true
}
