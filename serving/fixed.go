package serving

import "fmt"

// Fixed is static batching, as servers did before iteration-level
// scheduling: when the server is idle it takes up to MaxSeqs queued
// requests (FCFS) whose whole KV fits the device budget together, prefills
// them in one iteration, and decodes the batch until every member has
// finished; only then does the next batch start. The members' KV is
// reserved for their full length (prompt + max_tokens), so a batch never
// runs out of blocks and never preempts. Only live members' tokens are
// counted as work: finished members cost nothing here, which is kinder to
// static batching than padding a dense batch would be.
type Fixed struct {
	core
	maxSeqs int
}

// NewFixed makes a static-batching scheduler of batches of up to maxSeqs.
func NewFixed(blocks *Blocks, maxSeqs int) (*Fixed, error) {
	if maxSeqs < 1 {
		return nil, fmt.Errorf("fixed: batch of %d: want at least 1", maxSeqs)
	}
	return &Fixed{core: core{blocks: blocks}, maxSeqs: maxSeqs}, nil
}

// MaxSeqs is the batch size limit.
func (f *Fixed) MaxSeqs() int { return f.maxSeqs }

// Add queues s, or rejects a request whose KV cannot fit the budget.
func (f *Fixed) Add(s *Seq) error {
	if err := f.accept(s); err != nil {
		return err
	}
	if need := f.blocks.For(s.MaxKV()); need > f.blocks.Config().Device {
		return f.reject(s, "%d blocks of KV, budget %d", need, f.blocks.Config().Device)
	}
	f.enqueue(s)
	return nil
}

// Schedule forms a batch when the previous one has drained, then runs
// every live member's next tokens.
func (f *Fixed) Schedule() *Batch {
	b := f.begin()
	if f.nRunning == 0 {
		// The whole-length reservations sum to at most the budget: the
		// blocks the batch maps at any moment are fewer still, since a
		// shared block counts once.
		reserved := 0
		for f.nRunning < f.maxSeqs {
			s := f.waiting.front(Waiting)
			if s == nil {
				break
			}
			need := f.blocks.For(s.MaxKV())
			if reserved+need > f.blocks.Config().Device {
				break
			}
			reserved += need
			f.waiting.popFront()
			f.blocks.Lookup(s, &f.match)
			f.blocks.Attach(s, &f.match)
			f.admit(s)
		}
	}
	for _, s := range f.running {
		if s.State != Running {
			continue
		}
		n := s.Pending()
		if err := f.blocks.Reserve(s, n, &b.Copies); err != nil {
			panic(fmt.Sprintf("serving: fixed batch outgrew its reservation: request %d: %v", s.Req.ID, err))
		}
		f.add(b, s, n)
	}
	return f.finishBatch(b)
}

// Check verifies the queue and the block manager.
func (f *Fixed) Check() error { return f.checkCore(nil) }
