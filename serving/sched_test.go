package serving

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// step runs one iteration by hand: Schedule, synthetic tokens, Complete,
// and the invariant checker. It returns the batch's entries as text,
// "A0+4*" meaning request A processes tokens [0, 4) and samples.
func step(t *testing.T, s Scheduler) (string, *Batch) {
	t.Helper()
	b := s.Schedule()
	desc := describe(b)
	if !b.Empty() {
		for i := range b.Entries {
			if e := &b.Entries[i]; e.Sample {
				e.Token = e.Seq.NextSynthetic()
			}
		}
		s.Complete(b)
	}
	if err := s.Check(); err != nil {
		t.Fatalf("after %q: %v", desc, err)
	}
	return desc, b
}

func describe(b *Batch) string {
	var parts []string
	for _, e := range b.Entries {
		p := fmt.Sprintf("%c%d+%d", 'A'+e.Seq.Req.ID, e.Start, e.N)
		if e.Sample {
			p += "*"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func addAll(t *testing.T, s Scheduler, seqs ...*Seq) {
	t.Helper()
	for _, q := range seqs {
		if err := s.Add(q); err != nil {
			t.Fatal(err)
		}
	}
}

func newSeqs(shapes ...[2]int) []*Seq {
	var out []*Seq
	for i, sh := range shapes {
		out = append(out, NewSeq(&Request{ID: i, Prompt: sh[0], Output: sh[1]}))
	}
	return out
}

func newContinuous(t *testing.T, blocks BlockConfig, cfg ContinuousConfig) *Continuous {
	t.Helper()
	c, err := NewContinuous(newBlocks(t, blocks), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantSteps(t *testing.T, s Scheduler, want ...string) {
	t.Helper()
	for i, w := range want {
		if got, _ := step(t, s); got != w {
			t.Fatalf("iteration %d: %q, want %q", i+1, got, w)
		}
	}
}

func TestContinuousDecodesFirstThenAdmits(t *testing.T) {
	c := newContinuous(t, BlockConfig{Size: 4, Device: 16}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 64})
	q := newSeqs([2]int{4, 3}, [2]int{5, 2})
	addAll(t, c, q[0])
	wantSteps(t, c, "A0+4*")
	addAll(t, c, q[1])
	wantSteps(t, c, "A4+1* B0+5*", "A5+1* B5+1*", "")
	if q[0].State != Finished || q[1].State != Finished || c.Blocks().Used() != 0 {
		t.Fatalf("states %s %s, %d blocks used: want both finished and nothing held", q[0].State, q[1].State, c.Blocks().Used())
	}
}

func TestContinuousTokenBudgetStopsAdmission(t *testing.T) {
	c := newContinuous(t, BlockConfig{Size: 4, Device: 16}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 8})
	q := newSeqs([2]int{5, 2}, [2]int{4, 2}, [2]int{2, 2})
	addAll(t, c, q...)
	// A (5) fits the 8-token budget; B (4) does not, and FCFS stops there
	// though C (2) would fit.
	wantSteps(t, c, "A0+5*", "A5+1* B0+4* C0+2*", "B4+1* C2+1*", "")
}

func TestContinuousPreemptsMostRecent(t *testing.T) {
	for _, swap := range []bool{false, true} {
		t.Run(fmt.Sprintf("swap=%v", swap), func(t *testing.T) {
			host := 0
			if swap {
				host = 8
			}
			c := newContinuous(t, BlockConfig{Size: 4, Device: 4, Host: host}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 64, Swap: swap})
			q := newSeqs([2]int{7, 6}, [2]int{7, 6})
			addAll(t, c, q...)
			wantSteps(t, c, "A0+7* B0+7*", "A7+1* B7+1*")
			// A's 9th token needs a third block; none is free, so B, the
			// most recently admitted, goes.
			desc, b := step(t, c)
			if desc != "A8+1*" || len(b.Preempted) != 1 || b.Preempted[0] != q[1] {
				t.Fatalf("iteration 3: %q, preempted %v: want A alone, B preempted", desc, b.Preempted)
			}
			if swap {
				if q[1].State != Swapped || len(b.SwapOut) != 2 || q[1].Computed != 8 {
					t.Fatalf("B is %s with %d blocks swapped out, %d computed: want swapped, 2 blocks, KV kept", q[1].State, len(b.SwapOut), q[1].Computed)
				}
			} else if q[1].State != Waiting || q[1].Computed != 0 || c.waiting.front(Waiting) != q[1] {
				t.Fatalf("B is %s with %d computed: want waiting at the queue's front with its KV dropped", q[1].State, q[1].Computed)
			}
			// A runs alone to the end; then B comes back: swapped in with
			// its KV, or recomputed (its prompt and its 2 tokens so far).
			wantSteps(t, c, "A9+1*", "A10+1*", "A11+1*")
			desc, b = step(t, c)
			if swap {
				if desc != "B8+1*" || len(b.SwapIn) != 2 {
					t.Fatalf("after A: %q with %d blocks swapped in; want B's decode after a swap-in of 2", desc, len(b.SwapIn))
				}
			} else if desc != "B0+9*" || c.Stats().Recomputed != 8 {
				t.Fatalf("after A: %q, %d recomputed; want B's 9 tokens prefilled again, 8 of them recomputed", desc, c.Stats().Recomputed)
			}
			if st := c.Stats(); st.Preemptions != 1 || (st.Swaps == 1) != swap {
				t.Fatalf("stats %+v: want one preemption (a swap: %v)", st, swap)
			}
		})
	}
}

func TestChunkedPrefillSharesTheBudget(t *testing.T) {
	c := newContinuous(t, BlockConfig{Size: 4, Device: 16}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 8, Chunked: true})
	q := newSeqs([2]int{3, 4}, [2]int{20, 2})
	addAll(t, c, q[0])
	wantSteps(t, c, "A0+3*")
	addAll(t, c, q[1])
	// A decodes first; B's prompt fills what is left of 8 tokens a chunk at a time.
	wantSteps(t, c, "A3+1* B0+7", "A4+1* B7+7", "A5+1* B14+6*", "B20+1*")
}

func TestCancelAtAnyMoment(t *testing.T) {
	c := newContinuous(t, BlockConfig{Size: 4, Device: 16, Host: 8}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 64})
	q := newSeqs([2]int{6, 9}, [2]int{6, 9}, [2]int{6, 9})
	addAll(t, c, q...)
	if !c.Cancel(q[2]) || q[2].State != Cancelled { // still waiting
		t.Fatal("cancel of a waiting request failed")
	}
	wantSteps(t, c, "A0+6* B0+6*")
	// Cancelled while its batch is in flight: B's blocks stay until the
	// batch completes (the model is writing them), then they are freed.
	b := c.Schedule()
	used := c.Blocks().Used()
	if !c.Cancel(q[1]) || c.Blocks().Used() != used {
		t.Fatalf("cancel in flight released blocks early (%d → %d used)", used, c.Blocks().Used())
	}
	for i := range b.Entries {
		b.Entries[i].Token = b.Entries[i].Seq.NextSynthetic()
	}
	c.Complete(b)
	if c.Blocks().Used() != 2 || len(b.Finished) != 0 {
		t.Fatalf("after the batch: %d blocks used, finished %v; want A's 2 only", c.Blocks().Used(), b.Finished)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	if c.Cancel(q[1]) {
		t.Fatal("a second cancel reported success")
	}
	// Cancelled while swapped out.
	var out []Copy
	if err := c.Blocks().SwapOut(q[0], &out); err != nil {
		t.Fatal(err)
	}
	q[0].State = Swapped
	c.nRunning--
	c.swapped.pushBack(q[0])
	if !c.Cancel(q[0]) || c.Blocks().HostUsed() != 0 || c.Live() != 0 {
		t.Fatalf("cancel of a swapped request left %d host blocks, %d live", c.Blocks().HostUsed(), c.Live())
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestStopEndsEarly(t *testing.T) {
	c := newContinuous(t, BlockConfig{Size: 4, Device: 16}, ContinuousConfig{MaxSeqs: 8, MaxTokens: 64})
	q := newSeqs([2]int{4, 50})
	addAll(t, c, q...)
	b := c.Schedule()
	b.Entries[0].Token, b.Entries[0].Stop = 7, true
	c.Complete(b)
	if q[0].State != Finished || q[0].Generated != 1 || len(b.Finished) != 1 {
		t.Fatalf("a stop token left the request %s with %d tokens", q[0].State, q[0].Generated)
	}
}

func TestFixedRunsBatchToTheEnd(t *testing.T) {
	f, err := NewFixed(newBlocks(t, BlockConfig{Size: 4, Device: 16}), 2)
	if err != nil {
		t.Fatal(err)
	}
	q := newSeqs([2]int{4, 3}, [2]int{2, 1}, [2]int{3, 2})
	addAll(t, f, q...)
	// A and B form a batch; C waits for both to finish though B is done
	// after the first iteration.
	wantSteps(t, f, "A0+4* B0+2*", "A4+1*", "A5+1*", "C0+3*", "C3+1*", "")
}

func TestFixedReservesWholeLength(t *testing.T) {
	// 16 blocks of 4: A and B reserve 8 each (20 + 13 - 1 = 32 tokens of
	// KV), so C's one block does not fit beside them.
	f, err := NewFixed(newBlocks(t, BlockConfig{Size: 4, Device: 16}), 8)
	if err != nil {
		t.Fatal(err)
	}
	q := newSeqs([2]int{20, 13}, [2]int{20, 13}, [2]int{1, 2})
	addAll(t, f, q...)
	desc, _ := step(t, f)
	if desc != "A0+20* B0+20*" {
		t.Fatalf("first batch %q: want A and B only (their reservations fill the budget)", desc)
	}
}

func TestRejectsWhatCannotFit(t *testing.T) {
	blocks := BlockConfig{Size: 4, Device: 4}
	cases := []struct {
		name  string
		sched func() Scheduler
		req   Request
	}{
		{"continuous, too many blocks", func() Scheduler {
			return newContinuous(t, blocks, ContinuousConfig{MaxSeqs: 4, MaxTokens: 64})
		}, Request{Prompt: 10, Output: 8}},
		{"continuous, over the token budget unchunked", func() Scheduler {
			return newContinuous(t, blocks, ContinuousConfig{MaxSeqs: 4, MaxTokens: 8})
		}, Request{Prompt: 8, Output: 2}},
		{"fixed, too many blocks", func() Scheduler {
			f, _ := NewFixed(newBlocks(t, blocks), 4)
			return f
		}, Request{Prompt: 16, Output: 2}},
		{"invalid request", func() Scheduler {
			return newContinuous(t, blocks, ContinuousConfig{MaxSeqs: 4, MaxTokens: 64})
		}, Request{Prompt: 0, Output: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.sched()
			q := NewSeq(&tc.req)
			if err := s.Add(q); !errors.Is(err, ErrTooLarge) || q.State != Rejected || s.Live() != 0 {
				t.Fatalf("Add = %v, state %s, %d live; want ErrTooLarge, rejected, none live", err, q.State, s.Live())
			}
		})
	}
	// The same budgets take a request that fits.
	s := newContinuous(t, blocks, ContinuousConfig{MaxSeqs: 4, MaxTokens: 64})
	if err := s.Add(NewSeq(&Request{Prompt: 10, Output: 7})); err != nil {
		t.Fatalf("a request of 16 tokens of KV in 16 slots: %v", err)
	}
}
