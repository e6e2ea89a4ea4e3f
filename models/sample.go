package models

import (
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
	Seed        uint64  // the draws' random stream
}

// Sampler generates text from a model, one character per forward pass over
// the last Block characters (a B=1 evaluation graph). Generation is
// reproducible from SampleConfig.Seed.
type Sampler struct {
	model *Model
	tok   *Tokenizer
	ctx   []int32 // (1, T) window fed to the model
}

// NewSampler compiles the evaluation graph for p.
func NewSampler(p *Params, tok *Tokenizer) (*Sampler, error) {
	cfg := p.Config()
	if tok.Vocab() != cfg.Vocab {
		return nil, fmt.Errorf("%w: vocabulary of %d characters, model of %d", ErrConfig, tok.Vocab(), cfg.Vocab)
	}
	m, err := NewModel(cfg, p, 1, cfg.Block, false)
	if err != nil {
		return nil, err
	}
	return &Sampler{model: m, tok: tok, ctx: make([]int32, cfg.Block)}, nil
}

// Generate continues prompt by sc.Tokens characters and returns the
// continuation (without the prompt). An empty prompt starts from token 0.
// A prompt character outside the vocabulary is an error wrapping
// ErrBadData.
func (s *Sampler) Generate(prompt string, sc SampleConfig) (string, error) {
	if !(sc.Temperature >= 0) || math.IsInf(sc.Temperature, 0) || sc.TopK < 0 || sc.Tokens < 0 {
		return "", fmt.Errorf("%w: temperature %v, top-k %d, tokens %d: want temperature >= 0, top-k >= 0, tokens >= 0", ErrConfig, sc.Temperature, sc.TopK, sc.Tokens)
	}
	ids, err := s.tok.Encode(prompt)
	if err != nil {
		return "", fmt.Errorf("prompt: %w", err)
	}
	if len(ids) == 0 {
		ids = []int32{0}
	}
	n0 := len(ids)
	rng := rand.New(rand.NewPCG(sc.Seed, 0x73616d706c65)) // "sample"
	T, V := s.model.T, s.model.cfg.Vocab
	probs := make([]float64, V)
	order := make([]int, V)
	for range sc.Tokens {
		win := ids[max(0, len(ids)-T):]
		clear(s.ctx)
		copy(s.ctx, win) // positions after the window are padding: causal attention never reads them
		if _, err := s.model.Step(s.ctx, nil); err != nil {
			return "", err
		}
		logits := s.model.Logits()[(len(win)-1)*V : len(win)*V] // (V) at the window's last position
		ids = append(ids, pick(logits, probs, order, sc, rng))
	}
	return s.tok.Decode(ids[n0:]), nil
}

// pick draws the next token from logits under temperature and top-k.
func pick(logits []float32, probs []float64, order []int, sc SampleConfig, rng *rand.Rand) int32 {
	V := len(logits)
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
	if sc.Temperature == 0 {
		return int32(order[0])
	}
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
	u := rng.Float64() * sum
	for i := range k {
		u -= probs[i]
		if u < 0 {
			return int32(order[i])
		}
	}
	return int32(order[k-1])
}
