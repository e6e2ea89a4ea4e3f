package openai

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fake is a deterministic test backend. Its vocabulary is printable ASCII
// and newline (token = byte - 31, newline 0), and it "generates" its
// prompt over and over: output token i is prompt token i mod len(prompt),
// so a completion shows which request it belongs to. The token of '~' is
// its end token: reaching it ends the request with FinishStop, unsent.
// It admits at most limit requests at once (ErrBusy past that) and
// counts what it holds, so a test can check everything was released.
type fake struct {
	window int
	delay  time.Duration // per token
	limit  int

	mu        sync.Mutex
	active    int // requests started and not yet ended: what a real engine holds KV for
	started   int
	cancelled int
	last      GenerateRequest
}

func newFake() *fake { return &fake{window: 256, limit: 1 << 20} }

func (f *fake) ModelID() string    { return "fake-echo" }
func (f *fake) ContextWindow() int { return f.window }
func (f *fake) Vocab() int         { return 96 }

func (f *fake) Encode(text string) ([]int32, error) {
	var out []int32
	pos := 0
	for _, r := range text {
		switch {
		case r == '\n':
			out = append(out, 0)
		case r >= 32 && r < 127:
			out = append(out, int32(r-31))
		default:
			return nil, &VocabError{Char: r, Pos: pos}
		}
		pos++
	}
	return out, nil
}

func (f *fake) Decode(tokens []int32) string {
	b := make([]byte, len(tokens))
	for i, t := range tokens {
		b[i] = '\n'
		if t > 0 {
			b[i] = byte(t + 31)
		}
	}
	return string(b)
}

const fakeEnd = int32('~' - 31)

func (f *fake) Generate(ctx context.Context, req GenerateRequest) (<-chan Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active >= f.limit {
		return nil, fmt.Errorf("fake: %d requests running: %w", f.active, ErrBusy)
	}
	f.active++
	f.started++
	f.last = req
	ch := make(chan Token)
	go func() {
		defer close(ch)
		defer func() { f.mu.Lock(); f.active--; f.mu.Unlock() }()
		send := func(t Token) bool {
			select {
			case ch <- t:
				return true
			case <-ctx.Done():
				f.mu.Lock()
				f.cancelled++
				f.mu.Unlock()
				ch <- Token{Err: ctx.Err()}
				return false
			}
		}
		for i := range req.MaxTokens {
			if f.delay > 0 {
				select {
				case <-time.After(f.delay):
				case <-ctx.Done():
				}
			}
			id := req.Prompt[i%len(req.Prompt)]
			if id == fakeEnd {
				send(Token{Finish: FinishStop})
				return
			}
			if !send(Token{ID: id}) {
				return
			}
		}
		send(Token{Finish: FinishLength})
	}()
	return ch, nil
}

func (f *fake) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Running: f.active, KVUsage: float64(f.active) / float64(max(f.limit, 1))}
}

func (f *fake) holding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

type fakeCounts struct{ started, cancelled int }

func (f *fake) counts() fakeCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeCounts{f.started, f.cancelled}
}

func (f *fake) lastRequest() GenerateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}
