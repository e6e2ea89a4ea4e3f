package openai

import (
	"context"
	"errors"
	"fmt"
)

// Backend is what the server serves: a tokenizer and a generator of
// tokens. An engine, or a fake in a test, implements it; the server knows
// nothing else of the model.
type Backend interface {
	// ModelID is the name clients send as "model" and /v1/models lists.
	ModelID() string
	// ContextWindow is the most tokens a request may hold: its prompt
	// plus max_tokens.
	ContextWindow() int
	// Vocab is the number of tokens: a prompt given as token ids must
	// hold ids in [0, Vocab).
	Vocab() int
	// Encode turns text into tokens. A character outside the vocabulary
	// is a *VocabError naming it and its position.
	Encode(text string) ([]int32, error)
	// Decode turns tokens into text. Decoding a sequence piece by piece
	// gives the text of the whole, except that a piece may end inside a
	// character (the server then holds it back until the character is
	// whole: a trailing U+FFFD).
	Decode(tokens []int32) string
	// Generate starts a request. Its tokens come on the channel in order,
	// then one final Token with Finish or Err set and no token, then the
	// channel is closed. Cancelling ctx ends the request: the backend
	// frees what it holds for it and ends the stream (with Err set to
	// ctx's error, or by closing it). A backend over its queue limit
	// returns an error that wraps ErrBusy, at once.
	Generate(ctx context.Context, req GenerateRequest) (<-chan Token, error)
	// Stats is the backend's state now, for /metrics.
	Stats() Stats
}

// GenerateRequest is one prompt to continue.
type GenerateRequest struct {
	Prompt    []int32
	MaxTokens int // at least 1; len(Prompt)+MaxTokens ≤ ContextWindow
	// Sampling: Temperature 0 picks the most likely token (greedy), TopP 1
	// and TopK 0 keep every token; Seed seeds the request's draws.
	Temperature float64
	TopP        float64
	TopK        int
	Seed        uint64
}

// Finish says why a request ended.
type Finish string

// The finish reasons, as OpenAI's API spells them.
const (
	FinishLength Finish = "length" // max_tokens reached
	FinishStop   Finish = "stop"   // the model's end token, or a stop string
)

// Token is one event of a request's stream: a token (ID, with Finish and
// Err unset), or the final event, which has no token.
type Token struct {
	ID     int32
	Finish Finish // on the final event when the request ended normally
	Err    error  // on the final event when it did not
}

// Final reports whether t is the final event of a stream.
func (t Token) Final() bool { return t.Finish != "" || t.Err != nil }

// Stats is what /metrics shows of the backend's state.
type Stats struct {
	Running int     // requests holding KV and being decoded
	Waiting int     // requests queued for admission
	KVUsage float64 // fraction of the KV pool in use, 0 to 1
}

// ErrBusy marks a backend over its queue limit: the server answers 429
// with Retry-After.
var ErrBusy = errors.New("server busy: the queue is full")

// VocabError is a character the backend's vocabulary lacks.
type VocabError struct {
	Char rune
	Pos  int // index of the character (not the byte) in the text, from 0
}

func (e *VocabError) Error() string {
	return fmt.Sprintf("character %q (U+%04X) at position %d is not in the model's vocabulary", e.Char, e.Char, e.Pos)
}
