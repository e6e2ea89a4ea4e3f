package serving

import "fmt"

// Scheduler decides, once per iteration, which sequences run and how many
// tokens each processes. A driver calls Add as requests arrive, Schedule
// before each iteration, Complete after it, and Cancel at any moment (see
// the package documentation). Fixed and Continuous implement it.
type Scheduler interface {
	// Add queues an arrived request's sequence; a request that can never
	// fit is rejected (its state becomes Rejected) with an error wrapping
	// ErrTooLarge.
	Add(s *Seq) error
	// Cancel ends a sequence whatever its state. It returns false when the
	// sequence had already ended.
	Cancel(s *Seq) bool
	// Schedule returns the next iteration's batch. The batch is the
	// scheduler's own and valid until Complete; it is empty when nothing
	// can run. Schedule must not be called again before Complete.
	Schedule() *Batch
	// Complete reports that the batch ran, with Token (and Stop) set on
	// every entry that samples. Sequences that ended are in b.Finished.
	Complete(b *Batch)
	// Check verifies the scheduler's and its block manager's invariants.
	Check() error
	// Blocks is the block manager the scheduler allocates from.
	Blocks() *Blocks
	// Stats returns the counts so far.
	Stats() SchedStats
	// Live is the number of sequences added and not ended.
	Live() int
}

// Entry is one sequence's work in an iteration: tokens [Start, Start+N)
// of Seq are processed and their KV written.
type Entry struct {
	Seq      *Seq
	Start, N int
	// Sample is set when the entry covers the sequence's last known token:
	// the model samples a token after it.
	Sample bool
	Token  int32 // set by the driver when Sample
	Stop   bool  // set by the driver when the sampled token ends the request (EOS)
}

// Decode reports whether the entry is one output token's step, not a
// prefill (a prompt, a chunk of one, or a recompute).
func (e *Entry) Decode() bool { return e.N == 1 && e.Start >= e.Seq.Req.Prompt }

// Batch is one iteration's work.
type Batch struct {
	Iteration int64
	Entries   []Entry
	// Block copies the driver performs before the model runs: SwapOut
	// first (device → host), then SwapIn (host → device) and Copies
	// (copy on write, device → device).
	SwapOut, SwapIn, Copies []Copy
	Preempted               []*Seq // sequences that left the running set this iteration
	Finished                []*Seq // filled by Complete: sequences that produced their last token
}

// Empty reports whether the batch has no work.
func (b *Batch) Empty() bool { return len(b.Entries) == 0 }

func (b *Batch) reset(iter int64) {
	b.Iteration = iter
	b.Entries = b.Entries[:0]
	b.SwapOut, b.SwapIn, b.Copies = b.SwapOut[:0], b.SwapIn[:0], b.Copies[:0]
	b.Preempted, b.Finished = b.Preempted[:0], b.Finished[:0]
}

// Work is what a batch asks of the model: the inputs of the cost model.
type Work struct {
	PrefillTokens int64 // prompt (and recomputed) tokens processed
	PrefillPairs  int64 // (query, key) pairs of causal attention over them
	DecodeTokens  int64 // one per decoding sequence
	DecodeContext int64 // tokens of KV the decodes attend to
	SwapBlocks    int64 // blocks copied between device and host
}

// Work tallies the batch.
func (b *Batch) Work() Work {
	var w Work
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Decode() {
			w.DecodeTokens++
			w.DecodeContext += int64(e.Start + 1)
			continue
		}
		n, s := int64(e.N), int64(e.Start)
		w.PrefillTokens += n
		w.PrefillPairs += n*s + n*(n+1)/2 // query at position p attends to p+1 keys
	}
	w.SwapBlocks = int64(len(b.SwapOut) + len(b.SwapIn))
	return w
}

// Tokens is the number of tokens the batch processes.
func (b *Batch) Tokens() int {
	n := 0
	for i := range b.Entries {
		n += b.Entries[i].N
	}
	return n
}

// SchedStats counts a scheduler's events over a run.
type SchedStats struct {
	Iterations    int64
	Processed     int64 // tokens processed (prefill, recompute and decode)
	Recomputed    int64 // of those, tokens computed again after a preemption dropped their KV
	Preemptions   int64
	Swaps         int64 // preemptions that swapped out instead of dropping KV
	Finished      int64
	Cancelled     int64
	Rejected      int64
	MaxRunning    int // most sequences running in one iteration
	MaxBatchToken int // most tokens processed in one iteration
}

// core is the state both schedulers share: the queues, the block manager,
// the batch in flight, and Complete.
type core struct {
	blocks    *Blocks
	waiting   deque // FCFS; recompute victims go back to the front
	running   []*Seq
	nRunning  int
	iter      int64
	admits    int64
	batch     Batch
	inFlight  bool
	cancelled []*Seq // cancelled while their batch was in flight: freed at Complete
	live      int
	stats     SchedStats
	match     Match
}

func (c *core) Blocks() *Blocks   { return c.blocks }
func (c *core) Stats() SchedStats { return c.stats }
func (c *core) Live() int         { return c.live }

// accept checks that s is a new sequence of a valid request; an invalid
// request is rejected.
func (c *core) accept(s *Seq) error {
	if s.State != Waiting || len(s.Table) > 0 || s.Generated > 0 || s.scheduled >= 0 {
		return fmt.Errorf("serving: request %d added twice (state %s)", s.Req.ID, s.State)
	}
	if err := s.Req.Validate(); err != nil {
		return c.reject(s, "%v", err)
	}
	return nil
}

// enqueue puts an accepted sequence at the back of the waiting queue.
func (c *core) enqueue(s *Seq) {
	s.scheduled = 0
	c.waiting.pushBack(s)
	c.live++
}

func (c *core) reject(s *Seq, format string, args ...any) error {
	s.State = Rejected
	c.stats.Rejected++
	return fmt.Errorf("%w: request %d: %s", ErrTooLarge, s.Req.ID, fmt.Sprintf(format, args...))
}

// Cancel ends s wherever it is.
func (c *core) Cancel(s *Seq) bool {
	switch s.State {
	case Waiting: // the queue drops it lazily
	case Running:
		c.nRunning--
		if s.inFlight {
			c.cancelled = append(c.cancelled, s)
		} else {
			c.blocks.Free(s)
		}
	case Swapped:
		c.blocks.Free(s)
	default:
		return false
	}
	s.State = Cancelled
	c.live--
	c.stats.Cancelled++
	return true
}

// begin starts an iteration: a fresh batch and a compacted running list.
func (c *core) begin() *Batch {
	if c.inFlight {
		panic("serving: Schedule called before the previous batch completed")
	}
	c.iter++
	c.batch.reset(c.iter)
	k := 0
	for _, s := range c.running {
		if s.State == Running {
			c.running[k] = s
			k++
		}
	}
	clear(c.running[k:])
	c.running = c.running[:k]
	return &c.batch
}

// admit moves s into the running set as its most recent member.
func (c *core) admit(s *Seq) {
	c.admits++
	s.admitted = c.admits
	s.State = Running
	c.running = append(c.running, s)
	c.nRunning++
}

// add appends the next n tokens of s (already reserved) to the batch.
func (c *core) add(b *Batch, s *Seq, n int) {
	start := s.Computed
	b.Entries = append(b.Entries, Entry{Seq: s, Start: start, N: n, Sample: start+n == s.Len()})
	s.scheduled = c.iter
	s.inFlight = true
	c.stats.Processed += int64(n)
	if s.highWater > start {
		c.stats.Recomputed += int64(min(s.highWater, start+n) - start)
	}
}

// finishBatch records the batch's size; every scheduler's Schedule ends with it.
func (c *core) finishBatch(b *Batch) *Batch {
	if !b.Empty() {
		c.inFlight = true
		c.stats.Iterations++
		c.stats.MaxRunning = max(c.stats.MaxRunning, c.nRunning)
		c.stats.MaxBatchToken = max(c.stats.MaxBatchToken, b.Tokens())
	}
	return b
}

// Complete commits the batch: KV written, sampled tokens appended, ended
// sequences released.
func (c *core) Complete(b *Batch) {
	if b != &c.batch || !c.inFlight {
		panic("serving: Complete of a batch that is not in flight")
	}
	c.inFlight = false
	for i := range b.Entries {
		e := &b.Entries[i]
		s := e.Seq
		s.inFlight = false
		if s.State != Running {
			continue // cancelled in flight: freed below
		}
		c.blocks.Commit(s, e.N)
		if !e.Sample {
			continue
		}
		if s.Req.Tokens != nil {
			s.Out = append(s.Out, e.Token)
		}
		s.Generated++
		if s.Generated >= s.Req.Output || e.Stop {
			c.blocks.Free(s)
			s.State = Finished
			c.nRunning--
			c.live--
			c.stats.Finished++
			b.Finished = append(b.Finished, s)
		}
	}
	for _, s := range c.cancelled {
		c.blocks.Free(s)
	}
	clear(c.cancelled)
	c.cancelled = c.cancelled[:0]
}

// checkCore verifies the queues and the block manager, given the
// sequences a scheduler holds besides waiting and running.
func (c *core) checkCore(extra []*Seq) error {
	if c.inFlight {
		return broken("checked with a batch in flight")
	}
	var live []*Seq
	waiting := 0
	for i := 0; i < c.waiting.len(); i++ {
		s := c.waiting.at(i)
		if s.State == Waiting {
			live = append(live, s)
			waiting++
		} else if s.State != Cancelled {
			return broken("request %d in the waiting queue is %s", s.Req.ID, s.State)
		}
	}
	running := 0
	var last int64
	for _, s := range c.running {
		if s.State != Running {
			continue
		}
		if s.admitted <= last {
			return broken("running list out of admission order at request %d", s.Req.ID)
		}
		last = s.admitted
		live = append(live, s)
		running++
	}
	if running != c.nRunning {
		return broken("%d sequences running, counter says %d", running, c.nRunning)
	}
	live = append(live, extra...)
	if len(live) != c.live {
		return broken("%d sequences held, %d live", len(live), c.live)
	}
	return c.blocks.Check(live)
}

// deque is a ring buffer of sequences.
type deque struct {
	buf        []*Seq
	head, size int
}

func (d *deque) len() int      { return d.size }
func (d *deque) at(i int) *Seq { return d.buf[(d.head+i)%len(d.buf)] }

func (d *deque) grow() {
	if d.size < len(d.buf) {
		return
	}
	nb := make([]*Seq, max(16, 2*len(d.buf)))
	for i := 0; i < d.size; i++ {
		nb[i] = d.at(i)
	}
	d.buf, d.head = nb, 0
}

func (d *deque) pushBack(s *Seq) {
	d.grow()
	d.buf[(d.head+d.size)%len(d.buf)] = s
	d.size++
}

func (d *deque) pushFront(s *Seq) {
	d.grow()
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = s
	d.size++
}

func (d *deque) popFront() *Seq {
	s := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return s
}

// front returns the first sequence in state want, dropping the ended ones
// before it, or nil.
func (d *deque) front(want State) *Seq {
	for d.size > 0 {
		s := d.buf[d.head]
		if s.State == want {
			return s
		}
		if !s.State.Ended() {
			panic(fmt.Sprintf("serving: request %d is %s in a %s queue", s.Req.ID, s.State, want))
		}
		d.popFront()
	}
	return nil
}
