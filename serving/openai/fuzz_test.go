package openai

import (
	"encoding/json"
	"testing"
)

var fuzzSeeds = []string{
	`{"model":"fake-echo","prompt":"abc","max_tokens":7,"temperature":0}`,
	`{"prompt":["xy","pqr"],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"seed":7}`,
	`{"prompt":[1,2,3],"stop":["a","bc"],"top_p":0.5,"top_k":-1}`,
	`{"prompt":[[1],[2,3]],"n":1,"best_of":1,"logprobs":null,"ignore_eos":true,"repetition_penalty":1.0}`,
	`{"prompt":"héllo"}`, `{"prompt":"a","max_tokens":1e30}`, `{"prompt":"a","max_tokens":-9223372036854775809}`,
	`{"prompt":"a","seed":18446744073709551615}`, `{"prompt":"a","max_tokens":16.0}`, `{"prompt": "a",`, `null`, `[]`, ``,
	`{"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":3}`,
	`{"messages":[{"role":"system","content":[{"type":"text","text":"x"}]},{"role":"assistant","content":null}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
}

// checkJob asserts what every accepted request satisfies.
func checkJob(t *testing.T, b Backend, j *job) {
	if len(j.prompts) == 0 || len(j.prompts) > maxPrompts {
		t.Fatalf("accepted %d prompts", len(j.prompts))
	}
	for _, p := range j.prompts {
		if len(p) == 0 || len(p)+j.gen.MaxTokens > b.ContextWindow() {
			t.Fatalf("accepted a prompt of %d tokens with max_tokens %d in a window of %d", len(p), j.gen.MaxTokens, b.ContextWindow())
		}
		for _, id := range p {
			if id < 0 || int(id) >= b.Vocab() {
				t.Fatalf("accepted token %d", id)
			}
		}
	}
	g := j.gen
	if g.MaxTokens < 1 || !(g.Temperature >= 0 && g.Temperature <= 2) || !(g.TopP > 0 && g.TopP <= 1) || g.TopK < 0 {
		t.Fatalf("accepted settings %+v", g)
	}
	if len(j.stop) > maxStops || (j.includeUsage && !j.stream) {
		t.Fatalf("accepted stop %q, include_usage %v without stream %v", j.stop, j.includeUsage, j.stream)
	}
	for _, s := range j.stop {
		if s == "" {
			t.Fatalf("kept an empty stop string")
		}
	}
}

// checkRefusal asserts a refusal is a 400 with a message and marshals.
func checkRefusal(t *testing.T, err error) {
	e, ok := err.(*apiError)
	if !ok || e.Status != 400 || e.Message == "" || e.Type != "invalid_request_error" {
		t.Fatalf("refusal %#v: want a 400 apiError with a message", err)
	}
	if _, err := json.Marshal(e.body()); err != nil {
		t.Fatalf("the error body does not marshal: %v", err)
	}
}

func fuzzParser(f *testing.F, parse parser) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	b := newFake()
	b.window = 32
	f.Fuzz(func(t *testing.T, body []byte) {
		j, err := parse(body, b)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkJob(t, b, j)
	})
}

func FuzzParseCompletion(f *testing.F) { fuzzParser(f, parseCompletion) }
func FuzzParseChat(f *testing.F)       { fuzzParser(f, parseChat) }
