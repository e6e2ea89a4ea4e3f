package par

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLatch: Wait returns only after Done, whether Done comes before the
// wait, while the waiter spins, or once it naps; and the latch is
// reusable round after round.
func TestLatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delay time.Duration // before Done
	}{
		{"done first", -1},
		{"while spinning", 0},
		{"after napping", 3 * spinFor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := new(Latch)
			for round := range 5 {
				l.Reset()
				var finished atomic.Bool
				do := func() { finished.Store(true); l.Done() }
				if tc.delay < 0 {
					do()
				} else {
					go func() { time.Sleep(tc.delay); do() }()
				}
				l.Wait()
				if !finished.Load() {
					t.Fatalf("round %d: Wait returned before Done", round)
				}
			}
		})
	}
}

// TestLatchWaitsForDone is the negative control: without Done, Wait is
// still waiting well past the spin (napping, not returned).
func TestLatchWaitsForDone(t *testing.T) {
	l := new(Latch)
	l.Reset()
	var returned atomic.Bool
	go func() { l.Wait(); returned.Store(true) }()
	time.Sleep(5 * spinFor)
	if returned.Load() {
		t.Fatal("Wait returned with no Done")
	}
	l.Done()
	for !returned.Load() {
		time.Sleep(spinFor)
	}
}

// countTask counts its runs.
type countTask struct{ runs atomic.Int64 }

func (l *countTask) RunTask() { l.runs.Add(1) }

// TestOfferRunsOnce: a task the pool took is run once by a worker.
func TestOfferRunsOnce(t *testing.T) {
	if Workers() == 0 {
		t.Skip("one usable CPU: no pool")
	}
	var lt countTask
	for !offer(&lt) {
		time.Sleep(spinFor)
	}
	for lt.runs.Load() == 0 {
		time.Sleep(spinFor)
	}
	time.Sleep(2 * spinFor)
	if n := lt.runs.Load(); n != 1 {
		t.Errorf("one offer ran %d times", n)
	}
}
