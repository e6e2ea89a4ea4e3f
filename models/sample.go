package models

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SampleConfig controls text generation.
type SampleConfig struct {
	Tokens      int     // characters to generate
	Temperature float64 // logits are divided by it; 0 picks the most likely token
	TopK        int     // keep only the K most likely tokens; 0 keeps all
	// TopP keeps, after TopK, the most likely tokens whose probabilities
	// sum to at least TopP (nucleus sampling); 0 keeps all.
	TopP float64
	Seed uint64 // the draws' random stream
	// FullWindow runs the model over the whole window of the last Block
	// characters for every token, as the reference sampler does, instead
	// of decoding one token at a time against the KV cache. Both give the
	// same tokens (the logits agree within 1e-5).
	FullWindow bool
}

// ErrSampleConfig marks unusable sample settings.
var ErrSampleConfig = errors.New("bad sample settings")

// Validate reports the first unusable setting.
func (sc SampleConfig) Validate() error {
	switch {
	case sc.Tokens < 0:
		return fmt.Errorf("%w: tokens = %d, want >= 0", ErrSampleConfig, sc.Tokens)
	case !(sc.Temperature >= 0) || math.IsInf(sc.Temperature, 0):
		return fmt.Errorf("%w: temperature = %v, want a finite number >= 0", ErrSampleConfig, sc.Temperature)
	case sc.TopK < 0:
		return fmt.Errorf("%w: top-k = %d, want >= 0 (0 keeps all)", ErrSampleConfig, sc.TopK)
	case !(sc.TopP >= 0 && sc.TopP <= 1):
		return fmt.Errorf("%w: top-p = %v, want in [0, 1] (0 keeps all)", ErrSampleConfig, sc.TopP)
	}
	return nil
}

// Sampler generates text from a model. Each new character comes from the
// logits at the last position of the window of the last Block characters.
// By default they are decoded against a KV cache: the prompt (its last
// Block characters) is prefilled once, then each character is one decode
// step over the cache, until the text outgrows the block; from then on
// every step shifts the window and with it every absolute position, so
// the cache is rebuilt from the window (a prefill of Block characters).
// With SampleConfig.FullWindow every step runs the whole window instead
// (a B=1 evaluation graph of T = Block), the reference. Generation is
// reproducible from SampleConfig.Seed.
type Sampler struct {
	p   *Params
	tok *Tokenizer
	dec *Decoder      // the cached path, made on first use
	win *Model        // the full-window path, made on first use
	ctx []int32       // (1, T) window fed to win
	opt []ModelOption // of both paths' graphs (WithInt8)
	// The cache holds lastHeld, the tokens ids[heldFrom:] of the last call.
	heldFrom int
	lastHeld []int32
}

// NewSampler makes a sampler for p; its graphs are compiled on first use,
// with opts (WithInt8: an int8 model's).
func NewSampler(p *Params, tok *Tokenizer, opts ...ModelOption) (*Sampler, error) {
	cfg := p.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if tok.Vocab() != cfg.Vocab {
		return nil, fmt.Errorf("%w: the tokenizer has %d characters, the model's vocabulary %d", ErrBadData, tok.Vocab(), cfg.Vocab)
	}
	return &Sampler{p: p, tok: tok, opt: opts}, nil
}

// Generate continues prompt by sc.Tokens characters and returns the
// continuation (without the prompt). An empty prompt starts from token 0.
// A prompt character outside the vocabulary is an error wrapping
// ErrBadData.
func (s *Sampler) Generate(prompt string, sc SampleConfig) (string, error) {
	if err := sc.Validate(); err != nil {
		return "", err
	}
	ids, err := s.tok.Encode(prompt)
	if err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	if len(ids) == 0 {
		ids = []int32{0}
	}
	out, err := s.generate(ids, sc, nil)
	if err != nil {
		return "", err
	}
	return s.tok.Decode(out), nil
}

// generate continues ids by sc.Tokens tokens and returns them; trace (if
// not nil) sees the logits each token was drawn from.
func (s *Sampler) generate(ids []int32, sc SampleConfig, trace func(logits []float32)) ([]int32, error) {
	ids = slices.Clone(ids)
	n0 := len(ids)
	pk, err := NewPicker(sc, s.p.Config().Vocab)
	if err != nil {
		return nil, err
	}
	for range sc.Tokens {
		next := s.cached
		if sc.FullWindow {
			next = s.window
		}
		logits, err := next(ids)
		if err != nil {
			return nil, err
		}
		if trace != nil {
			trace(logits)
		}
		ids = append(ids, pk.Pick(logits))
	}
	return ids[n0:], nil
}

// window is the logits after ids from a forward over its last Block
// tokens: the reference path.
func (s *Sampler) window(ids []int32) ([]float32, error) {
	cfg := s.p.Config()
	if s.win == nil {
		m, err := NewModel(cfg, s.p, 1, cfg.Block, false, s.opt...)
		if err != nil {
			return nil, err
		}
		s.win, s.ctx = m, make([]int32, cfg.Block)
	}
	win := ids[max(0, len(ids)-cfg.Block):]
	clear(s.ctx)
	copy(s.ctx, win) // positions after the window are padding: causal attention never reads them
	if _, err := s.win.Step(s.ctx, nil); err != nil {
		return nil, err
	}
	V := cfg.Vocab
	return s.win.Logits()[(len(win)-1)*V : len(win)*V], nil // (V) at the window's last position
}

// cached is window's logits from the KV cache: one decode step when the
// cache holds the window but its last token, else a prefill of the window.
func (s *Sampler) cached(ids []int32) ([]float32, error) {
	cfg := s.p.Config()
	if s.dec == nil {
		d, err := NewDecoder(s.p, 1, s.opt...)
		if err != nil {
			return nil, err
		}
		s.dec = d
	}
	from := max(0, len(ids)-cfg.Block)
	held := s.dec.Len()
	feed := ids[from:]
	if from == s.heldFrom && held > 0 && held == len(feed)-1 && slices.Equal(s.lastHeld, feed[:held]) {
		feed = feed[held:] // decode the one new token
	} else {
		s.dec.Reset() // a new prompt, or the window slid: every position moved
		s.heldFrom = from
	}
	logits, err := s.dec.Append(feed)
	if err != nil {
		return nil, err
	}
	s.lastHeld = append(s.lastHeld[:0], ids[from:]...)
	V := cfg.Vocab
	return logits[len(logits)-V:], nil // (V) at the last position
}

// Close releases the compiled graphs.
func (s *Sampler) Close() error {
	var err error
	if s.dec != nil {
		err = s.dec.Close()
	}
	if s.win != nil {
		err = errors.Join(err, s.win.Close())
	}
	return err
}

// pick draws the next token from logits under temperature and top-k.
func pick(logits []float32, probs []float64, order []int, sc SampleConfig, rng *rand.Rand) int32 {
	V := len(logits)
	if sc.Temperature == 0 { // greedy: the first of the largest, what the stable sort puts first
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return int32(best)
	}
	for i := range order {
		order[i] = i
	}
	// most likely first; ties by id so the order is deterministic
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	k := V
	if sc.TopK > 0 {
		k = min(sc.TopK, V)
	}
	top := float64(logits[order[0]])
	sum := 0.0
	for i := range k {
		p := math.Exp((float64(logits[order[i]]) - top) / sc.Temperature)
		probs[i] = p
		sum += p
	}
	if sc.TopP > 0 && sc.TopP < 1 {
		c := 0.0
		for i := range k {
			if c += probs[i]; c >= sc.TopP*sum {
				k, sum = i+1, c
				break
			}
		}
	}
	u := rng.Float64() * sum
	for i := range k {
		u -= probs[i]
		if u < 0 {
			return int32(order[i])
		}
	}
	return int32(order[k-1])
}
