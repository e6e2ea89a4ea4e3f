package engine

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"gptlab/internal/testutil"
	"gptlab/models"
)

// collect reads a request's events: its tokens and its final event.
func collect(ch <-chan Event) ([]int32, Event) {
	var toks []int32
	for ev := range ch {
		if ev.Finish != "" {
			return toks, ev
		}
		toks = append(toks, ev.Token)
	}
	return toks, Event{}
}

// baseline is the goroutine count once the process-wide worker pools
// (internal/par's, started by a first forward) are up.
func baseline(t *testing.T, f *fixture) int {
	t.Helper()
	f.reference(t, Request{Prompt: []int32{1}, MaxTokens: 2})
	return runtime.NumGoroutine()
}

// settle waits for the goroutine count to come back to n.
func settle(t *testing.T, n int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > n; i++ {
		if i > 1000 {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d at the start:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startRun(t *testing.T, e *Engine, ctx context.Context) chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return done
}

// TestSubmitManyGoroutines: requests submitted from many goroutines at
// once each get the tokens they get alone; every block is free afterwards
// and the goroutines are gone.
func TestSubmitManyGoroutines(t *testing.T) {
	f := newFixture(t, "small")
	g0 := baseline(t, f)
	e, err := New(f.p, Config{BlockSize: 8, Blocks: 48, Caching: true, Policy: "continuous", MaxSeqs: 8, MaxTokens: 32, Chunked: true, Check: true, MaxWaiting: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := startRun(t, e, ctx)
	n := 40
	if testutil.Trimmed() { // emulated -short: 12 goroutines, not 40
		n = 12
	}
	reqs := f.requests(n, 20, 21, models.SampleConfig{Temperature: 0.7, Seed: 2})
	got := make([][]int32, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := e.Submit(context.Background(), r)
			if err != nil {
				t.Error(err)
				return
			}
			toks, fin := collect(ch)
			if fin.Finish != FinishLength || fin.Err != nil {
				t.Errorf("request %d: %q %v", i, fin.Finish, fin.Err)
			}
			got[i] = toks
		}()
	}
	wg.Wait()
	for i, r := range reqs {
		if want := f.reference(t, r); !slices.Equal(got[i], want) {
			t.Fatalf("request %d: %v, alone %v", i, got[i], want)
		}
	}
	st := e.Stats()
	var prompt, gen int64
	for _, r := range reqs {
		prompt += int64(len(r.Prompt))
		gen += int64(r.MaxTokens)
	}
	if st.PromptTokens != prompt || st.GeneratedTokens != gen || st.Running != 0 || st.Waiting != 0 || st.KVUsage != 0 {
		t.Fatalf("stats %+v, want %d prompt and %d generated tokens, nothing running or held", st, prompt, gen)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkFree(t, e)
	settle(t, g0)
}

// TestSubmitCancel: cancelling a request's context ends it with
// FinishCancelled; its blocks are free and the others run on.
func TestSubmitCancel(t *testing.T) {
	f := newFixture(t, "small")
	g0 := baseline(t, f)
	e, _ := New(f.p, Config{BlockSize: 8, Blocks: 48, Policy: "continuous", MaxSeqs: 8, MaxTokens: 32, Chunked: true, Check: true})
	// The loop waits for a tick in every iteration, so the test knows
	// the cancel is registered before the request could have finished.
	tick := make(chan struct{})
	e.midStep = func() { <-tick }
	ctx, stop := context.WithCancel(context.Background())
	done := startRun(t, e, ctx)
	long := Request{Prompt: []int32{1, 2, 3}, MaxTokens: 60}
	rctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Submit(rctx, long)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := e.Submit(context.Background(), Request{Prompt: []int32{4}, MaxTokens: 30})
	tick <- struct{}{}
	first := <-ch
	if first.Finish != "" {
		t.Fatalf("first event %+v", first)
	}
	cancel()
	// Wait to see the cancel registered. The loop's intake may take it
	// first (it is then applied; emulated, that interleaving happens), so
	// the wait is bounded: without ticks the request cannot finish.
	for wait := time.Now().Add(5 * time.Second); time.Now().Before(wait); time.Sleep(time.Millisecond) {
		e.async.mu.Lock()
		registered := len(e.async.cancels) > 0
		e.async.mu.Unlock()
		if registered {
			break
		}
	}
	ticking := make(chan struct{})
	go func() {
		for {
			select {
			case tick <- struct{}{}:
			case <-ticking:
				return
			}
		}
	}()
	toks, fin := collect(ch)
	if fin.Finish != FinishCancelled || !errors.Is(fin.Err, ErrCancelled) || !errors.Is(fin.Err, context.Canceled) {
		t.Fatalf("cancelled request ended %q, %v", fin.Finish, fin.Err)
	}
	if len(toks)+1 >= long.MaxTokens {
		t.Fatalf("the cancelled request ran to its end (%d tokens)", len(toks)+1)
	}
	if otoks, ofin := collect(other); ofin.Finish != FinishLength || len(otoks) != 30 {
		t.Fatalf("the other request: %d tokens, %q %v", len(otoks), ofin.Finish, ofin.Err)
	}
	// The last event is sent before the iteration ends: the loop frees
	// the blocks just after (emulated, visibly later), so wait for it.
	for wait := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st := e.Stats(); st.KVUsage == 0 && st.Running == 0 {
			break
		} else if time.Now().After(wait) {
			t.Fatalf("after both ended: %+v", st)
		}
	}
	// A context already done is refused at once.
	if _, err := e.Submit(rctx, long); !errors.Is(err, ErrCancelled) {
		t.Fatalf("submit with a done context: %v", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(ticking)
	checkFree(t, e)
	settle(t, g0)
}

// TestSubmitBusy: past MaxWaiting requests waiting, Submit refuses with
// ErrBusy; the accepted ones complete once the loop runs.
func TestSubmitBusy(t *testing.T) {
	f := newFixture(t, "tiny")
	e, _ := New(f.p, Config{BlockSize: 4, Blocks: 8, Policy: "continuous", MaxSeqs: 2, MaxTokens: 16, Chunked: true, MaxWaiting: 3, Check: true})
	r := Request{Prompt: []int32{1, 2}, MaxTokens: 5}
	var chans []<-chan Event
	for range 3 {
		ch, err := e.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	if _, err := e.Submit(context.Background(), r); !errors.Is(err, ErrBusy) {
		t.Fatalf("fourth submit: %v, want ErrBusy", err)
	}
	if st := e.Stats(); st.Waiting != 3 {
		t.Fatalf("stats say %d waiting, want 3", st.Waiting)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := startRun(t, e, ctx)
	for _, ch := range chans {
		if toks, fin := collect(ch); fin.Finish != FinishLength || len(toks) != 5 {
			t.Fatalf("%d tokens, %q %v", len(toks), fin.Finish, fin.Err)
		}
	}
	if _, err := e.Submit(context.Background(), r); err != nil { // room again
		t.Fatalf("submit after the queue drained: %v", err)
	}
	stop()
	<-done
}

// TestDrain: Close stops accepting and Run returns once what it held has
// finished; cancelling Run's context instead ends the requests with
// ErrStopped. Either way every block is free and no goroutine is left.
func TestDrain(t *testing.T) {
	f := newFixture(t, "small")
	g0 := baseline(t, f)
	for _, viaClose := range []bool{true, false} {
		e, _ := New(f.p, Config{BlockSize: 8, Blocks: 48, Policy: "continuous", MaxSeqs: 4, MaxTokens: 32, Chunked: true, Check: true})
		ctx, stop := context.WithCancel(context.Background())
		var chans []<-chan Event
		for _, r := range f.requests(8, 10, 5, models.SampleConfig{}) {
			ch, err := e.Submit(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			chans = append(chans, ch)
		}
		done := startRun(t, e, ctx)
		<-chans[0] // the loop is running
		if viaClose {
			e.Close()
		} else {
			stop()
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for i, ch := range chans {
			_, fin := collect(ch)
			switch {
			case viaClose && fin.Finish != FinishLength:
				t.Fatalf("close: request %d ended %q %v, want it finished", i, fin.Finish, fin.Err)
			case !viaClose && fin.Finish == FinishError && !errors.Is(fin.Err, ErrStopped):
				t.Fatalf("stop: request %d ended %q %v", i, fin.Finish, fin.Err)
			case fin.Finish == "":
				t.Fatalf("request %d has no final event", i)
			}
		}
		if _, err := e.Submit(context.Background(), Request{Prompt: []int32{1}, MaxTokens: 1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("submit after the drain: %v", err)
		}
		if err := e.Run(context.Background()); !errors.Is(err, ErrRunning) {
			t.Fatalf("second Run: %v", err)
		}
		checkFree(t, e)
		stop()
	}
	settle(t, g0)
}
