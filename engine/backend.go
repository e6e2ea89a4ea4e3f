package engine

import (
	"context"
	"errors"
	"fmt"

	"gptlab/models"
	"gptlab/serving/openai"
)

// Backend serves an engine through serving/openai (an openai.Backend):
// a character tokenizer, the engine's Submit as Generate (its events
// turned into the server's tokens), its Stats as /metrics' gauges. The
// engine's Run must be running.
type Backend struct {
	e      *Engine
	tok    *models.Tokenizer
	ids    map[rune]int32
	id     string
	window int
}

// NewBackend is e's Backend with tokenizer tok under the model id id.
func NewBackend(e *Engine, tok *models.Tokenizer, id string) *Backend {
	ids := make(map[rune]int32, tok.Vocab())
	for i, r := range []rune(tok.Chars()) {
		ids[r] = int32(i)
	}
	return &Backend{e: e, tok: tok, ids: ids, id: id, window: e.ModelConfig().Block}
}

// ModelID, ContextWindow, Vocab and Decode are openai.Backend's.
func (b *Backend) ModelID() string              { return b.id }
func (b *Backend) ContextWindow() int           { return b.window }
func (b *Backend) Vocab() int                   { return b.tok.Vocab() }
func (b *Backend) Decode(tokens []int32) string { return b.tok.Decode(tokens) }

// Encode maps each character to its token; the first character the
// vocabulary lacks is a *openai.VocabError naming it and its position.
func (b *Backend) Encode(text string) ([]int32, error) {
	out := make([]int32, 0, len(text))
	pos := 0
	for _, r := range text {
		id, ok := b.ids[r]
		if !ok {
			return nil, &openai.VocabError{Char: r, Pos: pos}
		}
		out = append(out, id)
		pos++
	}
	return out, nil
}

// Generate submits the request to the engine and relays its events; the
// engine's queue limit is the server's 429.
func (b *Backend) Generate(ctx context.Context, req openai.GenerateRequest) (<-chan openai.Token, error) {
	events, err := b.e.Submit(ctx, Request{Prompt: req.Prompt, MaxTokens: req.MaxTokens,
		Sample: models.SampleConfig{Temperature: req.Temperature, TopK: req.TopK, TopP: req.TopP, Seed: req.Seed}})
	switch {
	case errors.Is(err, ErrBusy):
		return nil, fmt.Errorf("%w (%v)", openai.ErrBusy, err)
	case err != nil:
		return nil, err
	}
	out := make(chan openai.Token, 1)
	go func() {
		defer close(out)
		for ev := range events { // the engine's channel holds the whole request: it never waits for us
			var t openai.Token
			switch {
			case ev.Finish == FinishLength:
				t.Finish = openai.FinishLength
			case ev.Finish != "":
				t.Err = ev.Err
				if t.Err == nil {
					t.Err = fmt.Errorf("engine: request ended: %s", ev.Finish)
				}
			default:
				t.ID = ev.Token
			}
			out <- t
		}
	}()
	return out, nil
}

// Stats is the engine's running and waiting requests and KV pool use.
func (b *Backend) Stats() openai.Stats {
	s := b.e.Stats()
	return openai.Stats{Running: s.Running, Waiting: s.Waiting, KVUsage: s.KVUsage}
}

var _ openai.Backend = (*Backend)(nil)
