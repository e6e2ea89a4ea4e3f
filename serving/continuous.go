package serving

import (
	"fmt"
	"math"
)

// ContinuousConfig sets the continuous scheduler's limits (vLLM's names in
// parentheses).
type ContinuousConfig struct {
	MaxSeqs   int // sequences running at once (max_num_seqs)
	MaxTokens int // tokens processed per iteration (max_num_batched_tokens)
	// Chunked splits a prompt over iterations to fit MaxTokens (chunked
	// prefill, Sarathi); without it a prompt is admitted only whole.
	Chunked bool
	// Swap preempts by swapping a victim's blocks out to the host budget
	// while it has room; otherwise, and without Swap, by recompute.
	Swap bool
	// Watermark is the fraction of device blocks admission keeps free, so
	// a newly admitted request does not force a preemption at once.
	Watermark float64
}

// DefaultContinuous is vLLM's v0 defaults: 256 sequences, a 2048-token
// budget, no chunking, recompute, a 1% watermark.
var DefaultContinuous = ContinuousConfig{MaxSeqs: 256, MaxTokens: 2048, Watermark: 0.01}

// Continuous is iteration-level scheduling as in Orca and vLLM: every
// iteration the running sequences decode first (oldest first), chunked
// prefills continue, swapped-out sequences come back, and new requests are
// admitted from the FCFS queue while sequences, tokens and blocks allow.
// When a running sequence needs a block and none is left, the most
// recently admitted sequence not yet scheduled this iteration is preempted
// (possibly the one asking): swapped out, or its KV dropped and the
// request queued at the front to be recomputed.
type Continuous struct {
	core
	cfg       ContinuousConfig
	swapped   deque
	watermark int
}

// NewContinuous makes a continuous scheduler over a block manager.
func NewContinuous(blocks *Blocks, cfg ContinuousConfig) (*Continuous, error) {
	if cfg.MaxSeqs < 1 || cfg.MaxTokens < 1 {
		return nil, fmt.Errorf("continuous: max sequences %d and max tokens %d: want at least 1", cfg.MaxSeqs, cfg.MaxTokens)
	}
	if cfg.Watermark < 0 || cfg.Watermark >= 1 {
		return nil, fmt.Errorf("continuous: watermark %g: want a fraction in [0, 1)", cfg.Watermark)
	}
	if cfg.Swap && blocks.Config().Host == 0 {
		return nil, fmt.Errorf("continuous: swap asked for, but the block manager has no host blocks")
	}
	return &Continuous{
		core:      core{blocks: blocks},
		cfg:       cfg,
		watermark: int(math.Ceil(cfg.Watermark * float64(blocks.Config().Device))),
	}, nil
}

// Config returns the scheduler's limits.
func (c *Continuous) Config() ContinuousConfig { return c.cfg }

// Add queues s, or rejects a request whose whole KV cannot fit the device
// budget (less the watermark) or, without chunking, whose recompute could
// not fit one iteration's token budget.
func (c *Continuous) Add(s *Seq) error {
	if err := c.accept(s); err != nil {
		return err
	}
	if need := c.blocks.For(s.MaxKV()); need > c.blocks.Config().Device-c.watermark {
		return c.reject(s, "%d blocks of KV, budget %d less watermark %d", need, c.blocks.Config().Device, c.watermark)
	}
	if !c.cfg.Chunked && s.MaxKV() > c.cfg.MaxTokens {
		return c.reject(s, "up to %d tokens to prefill at once, token budget %d (chunked prefill lifts this)", s.MaxKV(), c.cfg.MaxTokens)
	}
	c.enqueue(s)
	return nil
}

// Schedule builds the next iteration.
func (c *Continuous) Schedule() *Batch {
	b := c.begin()
	budget := c.cfg.MaxTokens
	// Running sequences, oldest first: decodes, then unfinished prefills.
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < len(c.running) && budget > 0; i++ {
			s := c.running[i]
			if s.State != Running || s.scheduled == c.iter {
				continue
			}
			n := s.Pending()
			if decode := s.Generated > 0 && n == 1; decode != (pass == 0) {
				continue
			}
			if n > budget {
				if !c.cfg.Chunked {
					continue
				}
				n = budget
			}
			if !c.makeRoom(b, s, n) {
				continue
			}
			c.reserve(b, s, n)
			budget -= n
		}
	}
	// As in vLLM: nothing comes back or joins in an iteration that had to
	// preempt, and no new request joins while a swapped one waits.
	preempted := len(b.Preempted) > 0
	if !preempted {
		budget = c.swapIn(b, budget)
	}
	if !preempted && c.swapped.front(Swapped) == nil {
		c.admitWaiting(b, budget)
	}
	return c.finishBatch(b)
}

// reserve takes the blocks of the next n tokens of s, which makeRoom (or
// an admission check) has made sure are there, and adds the entry.
func (c *Continuous) reserve(b *Batch, s *Seq, n int) {
	if err := c.blocks.Reserve(s, n, &b.Copies); err != nil {
		panic(fmt.Sprintf("serving: request %d: reservation checked but failed: %v", s.Req.ID, err))
	}
	c.add(b, s, n)
}

// makeRoom preempts until the next n tokens of s fit, youngest victim
// first. It returns false when s itself had to go.
func (c *Continuous) makeRoom(b *Batch, s *Seq, n int) bool {
	for c.blocks.ReserveCost(s, n) > c.blocks.Available() {
		v := c.victim()
		c.preempt(b, v)
		if v == s {
			return false
		}
	}
	return true
}

// victim is the most recently admitted running sequence not scheduled in
// this iteration. The one asking for room is such a sequence, so there is
// always one.
func (c *Continuous) victim() *Seq {
	for i := len(c.running) - 1; i >= 0; i-- {
		s := c.running[i]
		if s.State == Running && s.scheduled != c.iter {
			return s
		}
	}
	panic("serving: no preemption victim")
}

func (c *Continuous) preempt(b *Batch, v *Seq) {
	c.stats.Preemptions++
	v.Preemptions++
	c.nRunning--
	b.Preempted = append(b.Preempted, v)
	if c.cfg.Swap && c.blocks.SwapOut(v, &b.SwapOut) == nil {
		v.State = Swapped
		c.swapped.pushBack(v)
		c.stats.Swaps++
		return
	}
	c.blocks.Free(v)
	v.State = Waiting
	c.waiting.pushFront(v)
}

// swapIn brings swapped-out sequences back, oldest swap first, while
// their blocks and next tokens fit; it returns the token budget left.
func (c *Continuous) swapIn(b *Batch, budget int) int {
	for budget > 0 && c.nRunning < c.cfg.MaxSeqs {
		s := c.swapped.front(Swapped)
		if s == nil {
			break
		}
		n := s.Pending()
		if n > budget {
			if !c.cfg.Chunked {
				break
			}
			n = budget
		}
		if c.blocks.SwapInCost(s)+c.blocks.ReserveCost(s, n) > c.blocks.Available() {
			break
		}
		c.swapped.popFront()
		if err := c.blocks.SwapIn(s, &b.SwapIn); err != nil {
			panic(fmt.Sprintf("serving: request %d: swap-in checked but failed: %v", s.Req.ID, err))
		}
		c.admit(s)
		c.reserve(b, s, n)
		budget -= n
	}
	return budget
}

// admitWaiting admits queued requests in FCFS order while the running
// set, the token budget and the blocks (above the watermark) allow; the
// first that does not fit stops admission.
func (c *Continuous) admitWaiting(b *Batch, budget int) {
	mt := &c.match
	for budget > 0 && c.nRunning < c.cfg.MaxSeqs {
		s := c.waiting.front(Waiting)
		if s == nil {
			return
		}
		c.blocks.Lookup(s, mt)
		n := s.Len() - mt.Tokens
		if n > budget {
			if !c.cfg.Chunked {
				return
			}
			n = budget
		}
		if c.blocks.AdmitCost(mt, n)+c.watermark > c.blocks.Available() {
			return
		}
		c.waiting.popFront()
		c.blocks.Attach(s, mt)
		c.admit(s)
		c.reserve(b, s, n)
		budget -= n
	}
}

// Check verifies the queues and the block manager.
func (c *Continuous) Check() error {
	var swapped []*Seq
	for i := 0; i < c.swapped.len(); i++ {
		s := c.swapped.at(i)
		switch s.State {
		case Swapped:
			swapped = append(swapped, s)
		case Cancelled:
		default:
			return broken("request %d in the swapped queue is %s", s.Req.ID, s.State)
		}
	}
	return c.checkCore(swapped)
}
