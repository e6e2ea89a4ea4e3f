package cli

import (
	"context"
	"errors"
	"fmt"

	"gptlab/engine"
	"gptlab/models"
	"gptlab/serving/openai"
)

// engineBackend serves the paged-KV engine through serving/openai: the
// checkpoint's character tokenizer, the engine's Submit as Generate (its
// events turned into the server's tokens), its Stats as /metrics' gauges.
type engineBackend struct {
	e      *engine.Engine
	tok    *models.Tokenizer
	ids    map[rune]int32
	id     string
	window int
}

func newEngineBackend(e *engine.Engine, tok *models.Tokenizer, id string) *engineBackend {
	ids := make(map[rune]int32, tok.Vocab())
	for i, r := range []rune(tok.Chars()) {
		ids[r] = int32(i)
	}
	return &engineBackend{e: e, tok: tok, ids: ids, id: id, window: e.ModelConfig().Block}
}

func (b *engineBackend) ModelID() string              { return b.id }
func (b *engineBackend) ContextWindow() int           { return b.window }
func (b *engineBackend) Vocab() int                   { return b.tok.Vocab() }
func (b *engineBackend) Decode(tokens []int32) string { return b.tok.Decode(tokens) }

// Encode maps each character to its token; the first character the
// vocabulary lacks is a *openai.VocabError naming it and its position.
func (b *engineBackend) Encode(text string) ([]int32, error) {
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
func (b *engineBackend) Generate(ctx context.Context, req openai.GenerateRequest) (<-chan openai.Token, error) {
	events, err := b.e.Submit(ctx, engine.Request{Prompt: req.Prompt, MaxTokens: req.MaxTokens,
		Sample: models.SampleConfig{Temperature: req.Temperature, TopK: req.TopK, TopP: req.TopP, Seed: req.Seed}})
	switch {
	case errors.Is(err, engine.ErrBusy):
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
			case ev.Finish == engine.FinishLength:
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

func (b *engineBackend) Stats() openai.Stats {
	s := b.e.Stats()
	return openai.Stats{Running: s.Running, Waiting: s.Waiting, KVUsage: s.KVUsage}
}
