package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The response shapes, field for field as OpenAI's API has them.
type (
	envelope struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices any    `json:"choices"`
		Usage   *Usage `json:"usage,omitempty"`
	}
	textChoice struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		Logprobs     *string `json:"logprobs"` // always null
		FinishReason *Finish `json:"finish_reason"`
	}
	chatChoice struct {
		Index        int          `json:"index"`
		Message      *chatMessage `json:"message,omitempty"`
		Delta        *chatMessage `json:"delta,omitempty"`
		Logprobs     *string      `json:"logprobs"`
		FinishReason *Finish      `json:"finish_reason"`
	}
	chatMessage struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
)

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// response writes one request's answer.
type response struct {
	s       *Server
	j       *job
	id      string
	object  string // of the whole body; a chunk's is chunkObject
	chunk   string
	created int64
	usage   Usage
}

func newResponse(s *Server, j *job, num uint64) *response {
	r := &response{s: s, j: j, created: time.Now().Unix()}
	if j.chat {
		r.id, r.object, r.chunk = fmt.Sprintf("chatcmpl-%d", num), "chat.completion", "chat.completion.chunk"
	} else {
		r.id, r.object, r.chunk = fmt.Sprintf("cmpl-%d", num), "text_completion", "text_completion"
	}
	for _, p := range j.prompts {
		r.usage.PromptTokens += len(p)
	}
	return r
}

func (r *response) envelope(object string, choices any) envelope {
	return envelope{ID: r.id, Object: object, Created: r.created, Model: r.j.model, Choices: choices}
}

// choiceOf is one choice as a body (message) or a chunk (delta) holds it.
func (r *response) choiceOf(index int, text string, finish *Finish, delta, first bool) any {
	if !r.j.chat {
		return textChoice{Index: index, Text: text, FinishReason: finish}
	}
	m := &chatMessage{}
	if text != "" || !delta {
		m.Content = &text
	}
	if first || !delta {
		m.Role = "assistant" // a stream's first delta of each choice carries the role
	}
	if delta {
		return chatChoice{Index: index, Delta: m, FinishReason: finish}
	}
	return chatChoice{Index: index, Message: m, FinishReason: finish}
}

// stream writes the pieces as server-sent events, each a chunk, then the
// usage chunk when asked for and data: [DONE]. A client that goes away
// cancels the request (the pieces are still drained by the caller).
func (r *response) stream(w http.ResponseWriter, out <-chan piece, cancel context.CancelFunc) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	gone := false
	send := func(v any) {
		if gone {
			return
		}
		data, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil || rc.Flush() != nil {
			gone = true
			cancel()
		}
	}
	rc.Flush()
	started := make(map[int]bool)
	var failed error
	for p := range out {
		if p.last {
			r.usage.CompletionTokens += p.tokens
		}
		if p.err != nil {
			if failed == nil {
				failed = p.err
				cancel() // one choice failed: the request has failed
			}
			continue
		}
		if failed != nil || (p.text == "" && p.finish == "") {
			continue
		}
		var finish *Finish
		if p.last {
			finish = &p.finish
		}
		send(r.envelope(r.chunk, []any{r.choiceOf(p.index, p.text, finish, true, !started[p.index])}))
		started[p.index] = true
	}
	if failed != nil {
		send(r.s.endError(failed).body())
	} else if r.j.includeUsage {
		r.usage.TotalTokens = r.usage.PromptTokens + r.usage.CompletionTokens
		e := r.envelope(r.chunk, []any{})
		e.Usage = &r.usage
		send(e)
	}
	if !gone {
		fmt.Fprint(w, "data: [DONE]\n\n")
		rc.Flush()
	}
}

// collect gathers the pieces into one body and writes it; it returns the
// status written.
func (r *response) collect(w http.ResponseWriter, out <-chan piece, cancel context.CancelFunc) int {
	texts := make([]strings.Builder, len(r.j.prompts))
	finishes := make([]Finish, len(r.j.prompts))
	var failed error
	for p := range out {
		texts[p.index].WriteString(p.text)
		if p.last {
			r.usage.CompletionTokens += p.tokens
			finishes[p.index] = p.finish
			if p.err != nil && failed == nil {
				failed = p.err
				cancel() // one choice failed: the request has failed
			}
		}
	}
	if failed != nil {
		e := r.s.endError(failed)
		writeError(w, e, r.s.cfg.RetryAfter)
		return e.Status
	}
	choices := make([]any, len(texts))
	for i := range texts {
		choices[i] = r.choiceOf(i, texts[i].String(), &finishes[i], false, false)
	}
	r.usage.TotalTokens = r.usage.PromptTokens + r.usage.CompletionTokens
	e := r.envelope(r.object, choices)
	e.Usage = &r.usage
	writeJSON(w, http.StatusOK, e)
	return http.StatusOK
}
