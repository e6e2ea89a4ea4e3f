package par

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestFree: an empty Free gives nil, it keeps FreeSlots objects and drops
// the rest, and it gives each kept object back once.
func TestFree(t *testing.T) {
	var f Free[int]
	if p := f.Get(); p != nil {
		t.Fatalf("empty Free gave %p", p)
	}
	objs := make([]*int, FreeSlots+3)
	for i := range objs {
		objs[i] = new(int)
		*objs[i] = i
		f.Put(objs[i])
	}
	seen := map[*int]bool{}
	for range FreeSlots {
		p := f.Get()
		if p == nil {
			t.Fatalf("Free gave nil after %d of %d kept objects", len(seen), FreeSlots)
		}
		if seen[p] {
			t.Fatalf("Free gave object %d twice", *p)
		}
		seen[p] = true
	}
	if p := f.Get(); p != nil {
		t.Fatalf("Free gave object %d beyond its %d slots", *p, FreeSlots)
	}
	for _, p := range objs[:FreeSlots] {
		if !seen[p] {
			t.Errorf("object %d put first was not kept", *p)
		}
	}
}

// TestFreeExclusive: goroutines taking and giving back objects never hold
// the same one at once (run it with -race too).
func TestFreeExclusive(t *testing.T) {
	var f Free[atomic.Bool]
	for range FreeSlots / 2 {
		f.Put(new(atomic.Bool))
	}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20000 {
				p := f.Get()
				if p == nil {
					p = new(atomic.Bool)
				}
				if !p.CompareAndSwap(false, true) {
					bad.Add(1)
				}
				p.Store(false)
				f.Put(p)
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d times an object was held by two goroutines at once", n)
	}
}
