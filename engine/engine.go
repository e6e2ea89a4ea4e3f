package engine

import (
	"errors"
	"fmt"

	"gptlab/models"
	"gptlab/precision"
	"gptlab/serving"
)

// Config sizes an engine: its KV pool and the scheduler that fills it.
type Config struct {
	BlockSize  int  // tokens per KV block (vLLM's default is 16)
	Blocks     int  // device blocks in the pool
	HostBlocks int  // host blocks swapped-out sequences use (0: no swap)
	Caching    bool // automatic prefix caching

	// Policy is "continuous" (iteration-level, serving.Continuous) or
	// "fixed" (static batching, serving.Fixed).
	Policy    string
	MaxSeqs   int     // sequences running at once
	MaxTokens int     // tokens processed per iteration (continuous)
	Chunked   bool    // chunked prefill (continuous)
	Swap      bool    // preempt by swapping out while host blocks last (continuous)
	Watermark float64 // fraction of device blocks admission keeps free (continuous)

	// MaxWaiting is the most requests Submit lets wait for admission;
	// past it Submit returns ErrBusy. 0 means DefaultMaxWaiting.
	MaxWaiting int
	// Check runs serving's invariant checker after every iteration.
	Check bool
	// Weights is "f32" (or "") or "int8": the linear layers' matrices
	// quantized per output channel (models.Quantize; the tied head stays
	// float32) and multiplied by Int8Kernel.
	Weights    string
	Int8Kernel models.Int8Kernel
}

// DefaultMaxWaiting is the waiting-queue limit when Config leaves it 0.
const DefaultMaxWaiting = 256

// DefaultConfig is continuous batching with chunked prefill over a pool of
// 512 blocks of 16 tokens, prefix caching on, recompute preemption, up to
// 64 sequences and 512 tokens per iteration.
var DefaultConfig = Config{BlockSize: 16, Blocks: 512, Caching: true, Policy: "continuous",
	MaxSeqs: 64, MaxTokens: 512, Chunked: true, Watermark: 0.01}

// Errors of the engine. A request refused by Submit or Add wraps ErrBusy,
// ErrTooLong, ErrRequest or ErrClosed; a request that ended early carries
// ErrCancelled (or its context's cause) or ErrStopped in its final Event.
var (
	ErrBusy      = errors.New("engine: too many requests waiting")
	ErrTooLong   = errors.New("engine: request exceeds the context window")
	ErrRequest   = errors.New("engine: bad request")
	ErrClosed    = errors.New("engine: closed")
	ErrCancelled = errors.New("engine: request cancelled")
	ErrStopped   = errors.New("engine: stopped before the request finished")
	ErrConfig    = errors.New("engine: bad config")
)

// Request is one generation request.
type Request struct {
	Prompt    []int32 // token ids, at least one
	MaxTokens int     // tokens to generate (there is no end-of-text token: a request ends by length)
	// Sample sets the draw: Temperature (0: greedy), TopK, TopP, Seed, as
	// models.Sampler reads them; Tokens and FullWindow are not read.
	Sample models.SampleConfig
}

// Finish is why a request ended.
type Finish string

// The finishes of a request.
const (
	FinishLength    Finish = "length"    // it generated MaxTokens tokens
	FinishCancelled Finish = "cancelled" // its client cancelled it (Err says how)
	FinishError     Finish = "error"     // the engine ended it (Err says why)
)

// Event is one generated token of a request, or, as its last event, the
// finish (Finish set, no token).
type Event struct {
	Token  int32
	Finish Finish
	Err    error // nil when Finish is FinishLength
}

// Engine is the paged-KV engine over one model and one scheduler.
// The synchronous methods (Add, Step, Cancel, Idle) are for one goroutine
// and must not be used while Run runs; Submit, Close and Stats are safe
// from any goroutine.
type Engine struct {
	cfg    Config
	mcfg   models.Config
	kv     *models.PagedKV
	model  *models.PagedModel
	sched  serving.Scheduler
	blocks *serving.Blocks
	nextID int
	live   []*Handle // added and not ended, in order of arrival
	// one iteration's inputs, reused
	entries []models.PagedEntry
	tokens  []int32
	tables  []int32
	owners  []*Handle
	counts  counts
	checks  int64
	async   async
	midStep func() // tests: called while a batch is in flight
	// Replay's hooks: after the batch completes, before its events; each
	// token sent; each request finished by length.
	beforeEvents      func()
	onToken, onFinish func(h *Handle)
}

// counts are the engine's running totals.
type counts struct {
	prompt, generated int64
	iterations        int64
	// prefill and decode tokens the model ran (recomputes included)
	prefillRun, decodeRun int64
}

// Handle is a request inside the engine.
type Handle struct {
	ID     int
	seq    *serving.Seq
	req    serving.Request
	picker *models.Picker
	ended  bool
	finish Finish
	err    error
	out    chan Event // nil for a synchronous request
	stop   func() bool
	cause  error // why its context ended (async), set under the async lock
}

// Tokens are the tokens generated so far (the slice is the engine's).
func (h *Handle) Tokens() []int32 { return h.seq.Out }

// Done reports whether the request has ended, and how.
func (h *Handle) Done() (bool, Finish, error) { return h.ended, h.finish, h.err }

// Seq is the request's state in the scheduler (read only).
func (h *Handle) Seq() *serving.Seq { return h.seq }

// New makes an engine serving p: a pool of cfg.Blocks+cfg.HostBlocks
// blocks, the block manager and the scheduler over it. The pool must hold
// one request of the whole context window, so that every request Submit
// accepts can run.
func New(p *models.Params, cfg Config) (*Engine, error) {
	mcfg := p.Config()
	if cfg.MaxWaiting == 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
	}
	if cfg.MaxWaiting < 0 {
		return nil, fmt.Errorf("%w: max waiting %d, want >= 0", ErrConfig, cfg.MaxWaiting)
	}
	blocks, err := serving.NewBlocks(serving.BlockConfig{Size: cfg.BlockSize, Device: cfg.Blocks, Host: cfg.HostBlocks, Caching: cfg.Caching})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var sched serving.Scheduler
	switch cfg.Policy {
	case "continuous", "":
		cfg.Policy = "continuous"
		c, err := serving.NewContinuous(blocks, serving.ContinuousConfig{MaxSeqs: cfg.MaxSeqs, MaxTokens: cfg.MaxTokens,
			Chunked: cfg.Chunked, Swap: cfg.Swap, Watermark: cfg.Watermark})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		if !cfg.Chunked && cfg.MaxTokens < mcfg.Block {
			return nil, fmt.Errorf("%w: %d tokens per iteration without chunked prefill cannot prefill a window of %d", ErrConfig, cfg.MaxTokens, mcfg.Block)
		}
		sched = c
	case "fixed":
		f, err := serving.NewFixed(blocks, cfg.MaxSeqs)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
		sched = f
	default:
		return nil, fmt.Errorf("%w: policy %q, want continuous or fixed", ErrConfig, cfg.Policy)
	}
	wm := 0
	if cfg.Policy == "continuous" {
		wm = int(float64(cfg.Blocks)*cfg.Watermark + 0.999999)
	}
	if need := blocks.For(mcfg.Block); need > cfg.Blocks-wm {
		return nil, fmt.Errorf("%w: %d blocks of %d tokens (less a watermark of %d) cannot hold one request of the context window of %d", ErrConfig, cfg.Blocks, cfg.BlockSize, wm, mcfg.Block)
	}
	kv, err := models.NewPagedKV(mcfg, cfg.BlockSize, cfg.Blocks+cfg.HostBlocks)
	if err != nil {
		return nil, err
	}
	var model *models.PagedModel
	switch cfg.Weights {
	case "f32", "":
		model, err = models.NewPagedModel(p, kv)
	case "int8":
		var q *models.Quantized
		if q, err = models.Quantize(p, models.QuantizeOptions{Scheme: precision.Int8PerChannel}); err == nil {
			model, err = models.NewPagedModelInt8(q, cfg.Int8Kernel, kv)
		}
	default:
		return nil, fmt.Errorf("%w: weights %q, want f32 or int8", ErrConfig, cfg.Weights)
	}
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, mcfg: mcfg, kv: kv, model: model, sched: sched, blocks: blocks}
	e.async.init()
	return e, nil
}

// Config is the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// ModelConfig is the served model's configuration.
func (e *Engine) ModelConfig() models.Config { return e.mcfg }

// Scheduler is the scheduler the engine drives (for its stats and checks).
func (e *Engine) Scheduler() serving.Scheduler { return e.sched }

// Checks counts the invariant checks run (Config.Check).
func (e *Engine) Checks() int64 { return e.checks }

// Validate reports a request the engine can never serve: an empty prompt,
// a token outside the vocabulary, MaxTokens below 1, a prompt that with
// MaxTokens exceeds the context window (ErrTooLong, naming the limits),
// bad sampling settings.
func (e *Engine) Validate(r Request) error {
	switch {
	case len(r.Prompt) == 0:
		return fmt.Errorf("%w: empty prompt", ErrRequest)
	case r.MaxTokens < 1:
		return fmt.Errorf("%w: max tokens %d, want at least 1", ErrRequest, r.MaxTokens)
	case len(r.Prompt)+r.MaxTokens > e.mcfg.Block:
		return fmt.Errorf("%w: prompt of %d tokens + max tokens %d = %d, over the context window of %d", ErrTooLong, len(r.Prompt), r.MaxTokens, len(r.Prompt)+r.MaxTokens, e.mcfg.Block)
	}
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= e.mcfg.Vocab {
			return fmt.Errorf("%w: prompt token %d is %d, outside the vocabulary [0, %d)", ErrRequest, i, t, e.mcfg.Vocab)
		}
	}
	if err := r.Sample.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	return nil
}

// newHandle makes the engine-side state of a valid request.
func (e *Engine) newHandle(r Request) *Handle {
	pk, _ := models.NewPicker(r.Sample, e.mcfg.Vocab) // validated
	h := &Handle{ID: e.nextID, picker: pk}
	e.nextID++
	h.req = serving.Request{ID: h.ID, Prompt: len(r.Prompt), Output: r.MaxTokens, Tokens: append([]int32(nil), r.Prompt...)}
	h.seq = serving.NewSeq(&h.req)
	return h
}

// Add queues a request (synchronous use).
func (e *Engine) Add(r Request) (*Handle, error) {
	if err := e.Validate(r); err != nil {
		return nil, err
	}
	h := e.newHandle(r)
	if err := e.admit(h); err != nil {
		return nil, err
	}
	return h, nil
}

// admit hands a request to the scheduler.
func (e *Engine) admit(h *Handle) error {
	if err := e.sched.Add(h.seq); err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	e.live = append(e.live, h)
	e.counts.prompt += int64(h.req.Prompt)
	return nil
}

// Cancel ends a request (synchronous use); its blocks are free at once,
// or when its batch completes if one is in flight. It returns false when
// the request had already ended.
func (e *Engine) Cancel(h *Handle, cause error) bool {
	if h.ended || !e.sched.Cancel(h.seq) {
		return false
	}
	if cause == nil {
		cause = ErrCancelled
	}
	e.end(h, FinishCancelled, cause)
	return true
}

// Idle reports whether no request is live.
func (e *Engine) Idle() bool { return e.sched.Live() == 0 }

// end records a request's finish and sends its final event.
func (e *Engine) end(h *Handle, f Finish, err error) {
	h.ended, h.finish, h.err = true, f, err
	if h.out != nil {
		h.out <- Event{Finish: f, Err: err}
		close(h.out)
	}
	if h.stop != nil {
		h.stop()
	}
}

// StepInfo is what one iteration did.
type StepInfo struct {
	Work    serving.Work
	Tokens  int // tokens the model processed
	Sampled int // tokens generated
	Entries int
}

// Step runs one iteration: schedule, carry out the block copies on the
// pool, run the batch in one forward, draw the tokens, complete. An empty
// StepInfo means nothing could run.
func (e *Engine) Step() (StepInfo, error) {
	b := e.sched.Schedule()
	if b.Empty() {
		return StepInfo{}, nil
	}
	info := StepInfo{Work: b.Work(), Tokens: b.Tokens(), Entries: len(b.Entries)}
	err := e.run(b)
	if e.midStep != nil {
		e.midStep()
	}
	e.sched.Complete(b)
	e.counts.iterations++
	if e.beforeEvents != nil {
		e.beforeEvents()
	}
	if err != nil { // a bug, not a request's fault: end what ran
		for i := range b.Entries {
			if h := e.owners[i]; !h.ended {
				e.sched.Cancel(h.seq)
				e.end(h, FinishError, err)
			}
		}
		return info, err
	}
	for i := range b.Entries {
		en := &b.Entries[i]
		h := e.owners[i]
		if en.Decode() {
			e.counts.decodeRun++
		} else {
			e.counts.prefillRun += int64(en.N)
		}
		if !en.Sample || h.ended {
			continue
		}
		if st := h.seq.State; st != serving.Running && st != serving.Finished {
			continue
		}
		info.Sampled++
		e.counts.generated++
		if h.out != nil {
			h.out <- Event{Token: en.Token}
		}
		if e.onToken != nil {
			e.onToken(h)
		}
	}
	for _, s := range b.Finished {
		if h := e.handleOf(s); !h.ended {
			if e.onFinish != nil {
				e.onFinish(h)
			}
			e.end(h, FinishLength, nil)
		}
	}
	e.prune()
	if e.cfg.Check {
		if err := e.sched.Check(); err != nil {
			return info, fmt.Errorf("after iteration %d: %w", b.Iteration, err)
		}
		e.checks++
	}
	return info, nil
}

// run carries out the batch's copies and runs its entries.
func (e *Engine) run(b *serving.Batch) error {
	for _, list := range [][]serving.Copy{b.SwapOut, b.SwapIn, b.Copies} {
		for _, c := range list {
			if err := e.kv.Copy(int(c.Src), int(c.Dst), c.Tokens); err != nil {
				return err
			}
		}
	}
	e.entries, e.owners = e.entries[:0], e.owners[:0]
	e.tokens, e.tables = e.tokens[:0], e.tables[:0]
	for i := range b.Entries {
		en := &b.Entries[i]
		s := en.Seq
		for p := en.Start; p < en.Start+en.N; p++ {
			e.tokens = append(e.tokens, s.Token(p))
		}
		for _, id := range s.Table {
			e.tables = append(e.tables, int32(id))
		}
	}
	tk, tb := 0, 0
	for i := range b.Entries {
		en := &b.Entries[i]
		n := len(en.Seq.Table)
		e.entries = append(e.entries, models.PagedEntry{Tokens: e.tokens[tk : tk+en.N], Start: en.Start, Table: e.tables[tb : tb+n], Logits: en.Sample})
		e.owners = append(e.owners, e.handleOf(en.Seq))
		tk, tb = tk+en.N, tb+n
	}
	logits, err := e.model.Forward(e.entries)
	if err != nil {
		return err
	}
	V, r := e.mcfg.Vocab, 0
	for i := range b.Entries {
		en := &b.Entries[i]
		if !en.Sample {
			continue
		}
		en.Token = e.owners[i].picker.Pick(logits[r*V : (r+1)*V])
		r++
	}
	return nil
}

// handleOf finds the handle of a live sequence.
func (e *Engine) handleOf(s *serving.Seq) *Handle {
	id := s.Req.ID
	// live is in ID order: binary search.
	lo, hi := 0, len(e.live)
	for lo < hi {
		m := (lo + hi) / 2
		if e.live[m].ID < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(e.live) && e.live[lo].ID == id {
		return e.live[lo]
	}
	panic(fmt.Sprintf("engine: sequence of request %d has no live handle", id))
}

// prune drops the ended handles from the live list.
func (e *Engine) prune() {
	k := 0
	for _, h := range e.live {
		if !h.ended {
			e.live[k] = h
			k++
		}
	}
	clear(e.live[k:])
	e.live = e.live[:k]
}
