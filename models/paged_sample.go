package models

import "math/rand/v2"

// Picker draws a request's tokens from logits under its SampleConfig
// (temperature, top-k, top-p) from its own random stream: the Sampler's
// draw (pick) and seeding, so a request served by an engine gets the
// tokens Generate gives for the same prompt and settings. Tokens is not
// read. It is not safe for concurrent use; each request has its own.
type Picker struct {
	sc    SampleConfig
	rng   *rand.Rand
	probs []float64
	order []int
}

// NewPicker makes the picker of one request over a vocabulary of V.
func NewPicker(sc SampleConfig, V int) (*Picker, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return &Picker{sc: sc, rng: rand.New(rand.NewPCG(sc.Seed, 0x73616d706c65) /* "sample" */), probs: make([]float64, V), order: make([]int, V)}, nil
}

// Pick draws the next token from logits (V).
func (p *Picker) Pick(logits []float32) int32 { return pick(logits, p.probs, p.order, p.sc, p.rng) }
