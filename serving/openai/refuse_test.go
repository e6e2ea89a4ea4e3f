package openai

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBadRequests: every refusal is its status with OpenAI's error body
// naming the field and the cause; the backend never sees the request.
func TestBadRequests(t *testing.T) {
	f := newFake()
	f.window = 16
	_, ts := newTestServer(t, f)
	const c, chat = "/v1/completions", "/v1/chat/completions"
	for _, tc := range []struct {
		name, path, body string
		status           int
		param, code      string
		says             []string // in the message
	}{
		{"malformed JSON", c, `{"prompt": "a",`, 400, "", "invalid_json", []string{"not valid JSON"}},
		{"two JSON values", c, `{"prompt":"a"} {}`, 400, "", "invalid_json", []string{"more than one"}},
		{"not an object", c, `[1]`, 400, "", "invalid_json", nil},
		{"null body", c, `null`, 400, "", "invalid_json", nil},
		{"unknown model", c, `{"model":"gpt-4","prompt":"a"}`, 400, "model", "model_not_found", []string{`"gpt-4"`, `"fake-echo"`}},
		{"model not a string", c, `{"model":3,"prompt":"a"}`, 400, "model", "invalid_type", nil},
		{"no prompt", c, `{"max_tokens":3}`, 400, "prompt", "missing_required_parameter", nil},
		{"prompt a number", c, `{"prompt":3}`, 400, "prompt", "invalid_type", nil},
		{"empty prompt", c, `{"prompt":""}`, 400, "prompt", "invalid_prompt", []string{"empty"}},
		{"empty prompt list", c, `{"prompt":[]}`, 400, "prompt", "invalid_prompt", nil},
		{"character outside the vocabulary", c, `{"prompt":"héllo"}`, 400, "prompt", "invalid_prompt", []string{`'é'`, "U+00E9", "position 1"}},
		{"outside the vocabulary, second prompt", c, `{"prompt":["ok","a\tb"]}`, 400, "prompt", "invalid_prompt", []string{"prompt[1]", `'\t'`, "position 1"}},
		{"token id outside the vocabulary", c, `{"prompt":[1,2,96]}`, 400, "prompt", "invalid_prompt", []string{"token 96", "position 2", "96 tokens"}},
		{"negative max_tokens", c, `{"prompt":"a","max_tokens":-1}`, 400, "max_tokens", "out_of_range", []string{"at least 1"}},
		{"zero max_tokens", c, `{"prompt":"a","max_tokens":0}`, 400, "max_tokens", "out_of_range", nil},
		{"huge max_tokens", c, `{"prompt":"a","max_tokens":100000}`, 400, "max_tokens", "out_of_range", []string{"100000", "context window of 16"}},
		{"max_tokens past int64", c, `{"prompt":"a","max_tokens":1e30}`, 400, "max_tokens", "out_of_range", []string{"1e30"}},
		{"fractional max_tokens", c, `{"prompt":"a","max_tokens":2.5}`, 400, "max_tokens", "invalid_type", nil},
		{"max_tokens a string", c, `{"prompt":"a","max_tokens":"5"}`, 400, "max_tokens", "invalid_type", nil},
		{"prompt plus max_tokens over the window", c, `{"prompt":"abcdefghij","max_tokens":7}`, 400, "max_tokens", "context_length_exceeded",
			[]string{"10 tokens", "max_tokens = 7", "17", "context window of 16"}},
		{"prompt alone fills the window", c, `{"prompt":"abcdefghijklmnop"}`, 400, "prompt", "context_length_exceeded", []string{"16 tokens"}},
		{"temperature above 2", c, `{"prompt":"a","temperature":2.5}`, 400, "temperature", "out_of_range", []string{"[0, 2]"}},
		{"negative temperature", c, `{"prompt":"a","temperature":-0.1}`, 400, "temperature", "out_of_range", nil},
		{"top_p 0", c, `{"prompt":"a","top_p":0}`, 400, "top_p", "out_of_range", []string{"(0, 1]"}},
		{"top_p above 1", c, `{"prompt":"a","top_p":1.5}`, 400, "top_p", "out_of_range", nil},
		{"top_k below -1", c, `{"prompt":"a","top_k":-2}`, 400, "top_k", "out_of_range", nil},
		{"n 2", c, `{"prompt":"a","n":2}`, 400, "n", "unsupported_parameter", []string{"n = 2"}},
		{"five stop strings", c, `{"prompt":"a","stop":["a","b","c","d","e"]}`, 400, "stop", "out_of_range", nil},
		{"stop a number", c, `{"prompt":"a","stop":5}`, 400, "stop", "invalid_type", nil},
		{"stream_options without stream", c, `{"prompt":"a","stream_options":{"include_usage":true}}`, 400, "stream_options", "invalid_value", nil},
		{"logprobs", c, `{"prompt":"a","logprobs":2}`, 400, "logprobs", "unsupported_parameter", nil},
		{"echo", c, `{"prompt":"a","echo":true}`, 400, "echo", "unsupported_parameter", nil},
		{"best_of 3", c, `{"prompt":"a","best_of":3}`, 400, "best_of", "unsupported_parameter", nil},
		{"presence_penalty", c, `{"prompt":"a","presence_penalty":0.5}`, 400, "presence_penalty", "unsupported_parameter", nil},
		{"seed a string", c, `{"prompt":"a","seed":"x"}`, 400, "seed", "invalid_type", nil},
		{"chat: no messages", chat, `{}`, 400, "messages", "missing_required_parameter", nil},
		{"chat: empty messages", chat, `{"messages":[]}`, 400, "messages", "out_of_range", nil},
		{"chat: unknown role", chat, `{"messages":[{"role":"robot","content":"x"}]}`, 400, "messages", "invalid_value", []string{"messages[0].role"}},
		{"chat: image part", chat, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages", "invalid_type", nil},
		{"chat: outside the vocabulary", chat, `{"messages":[{"role":"user","content":"ñ"}]}`, 400, "messages", "invalid_prompt",
			[]string{"chat prompt", `'ñ'`, "position 6"}},
		{"chat: over the window", chat, `{"messages":[{"role":"user","content":"abc"}],"max_completion_tokens":5}`, 400,
			"messages", "context_length_exceeded", []string{"20 tokens", "context window of 16"}},
		{"chat: logprobs", chat, `{"messages":[{"role":"user","content":"a"}],"logprobs":true}`, 400, "logprobs", "unsupported_parameter", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.counts().started
			code, _, body := post(t, ts.URL, tc.path, tc.body)
			var eb struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    *string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &eb); err != nil {
				t.Fatalf("body %q is not an error body: %v", body, err)
			}
			param, ecode := "", ""
			if eb.Error.Param != nil {
				param = *eb.Error.Param
			}
			if eb.Error.Code != nil {
				ecode = *eb.Error.Code
			}
			if code != tc.status || param != tc.param || ecode != tc.code || eb.Error.Type != "invalid_request_error" {
				t.Errorf("POST %s %s: %d param %q code %q type %q, want %d %q %q invalid_request_error (%s)",
					tc.path, tc.body, code, param, ecode, eb.Error.Type, tc.status, tc.param, tc.code, eb.Error.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(eb.Error.Message, s) {
					t.Errorf("message %q does not say %q", eb.Error.Message, s)
				}
			}
			if f.counts().started != before {
				t.Errorf("the backend started a refused request")
			}
		})
	}
	// a negative control: the same server takes a good request
	if code, _, body := post(t, ts.URL, c, `{"prompt":"abcdefghij","max_tokens":6}`); code != 200 {
		t.Errorf("a request that fills the window exactly: %d %s", code, body)
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFake()
	ts := newServerWith(t, f, Config{MaxBodyBytes: 100})
	code, _, body := post(t, ts, "/v1/completions", `{"prompt":"`+strings.Repeat("a", 200)+`"}`)
	if code != 413 || !strings.Contains(body, "limit of 100 bytes") {
		t.Errorf("a 200-byte body against a limit of 100: %d %s, want 413 naming the limit", code, body)
	}
	if code, _, body := post(t, ts, "/v1/completions", `{"prompt":"a"}`); code != 200 {
		t.Errorf("a small body: %d %s", code, body)
	}
}

func newServerWith(t *testing.T, f *fake, cfg Config) string {
	t.Helper()
	ts := httptest.NewServer(New(f, cfg))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestBusy: a backend over its limit is a 429 with Retry-After, and a
// request of several prompts of which one does not fit starts none.
func TestBusy(t *testing.T) {
	f := newFake()
	f.limit, f.delay = 2, 20*time.Millisecond
	ts := newServerWith(t, f, Config{RetryAfter: 1500 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":200,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	code, h, body := post(t, ts, "/v1/completions", `{"prompt":["a","b"],"max_tokens":3}`)
	if code != 429 || h.Get("Retry-After") != "2" || !strings.Contains(body, "queue") {
		t.Errorf("two prompts with room for one: %d Retry-After %q %s, want 429, 2", code, h.Get("Retry-After"), body)
	}
	if f.counts().started != 2 { // the streaming request and the first prompt, given back at once
		t.Errorf("the backend started %d requests, want 2", f.counts().started)
	}
	cancel()
	io.Copy(io.Discard, resp.Body)
	waitFree(t, f)
	if code, _, body := post(t, ts, "/v1/completions", `{"prompt":["a","b"],"max_tokens":3}`); code != 200 {
		t.Errorf("after the first finished: %d %s", code, body)
	}
}

// TestDisconnect: a client that goes away mid-stream cancels its backend
// request, which frees what it held.
func TestDisconnect(t *testing.T) {
	f := newFake()
	f.delay = 5 * time.Millisecond
	_, ts := newTestServer(t, f)
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		body := `{"prompt":"abc","max_tokens":250,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		deadline := time.Now().Add(5 * time.Second)
		for f.holding() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		before := f.counts().cancelled
		cancel()
		<-done
		waitFree(t, f)
		if f.counts().cancelled != before+1 {
			t.Errorf("stream %v: the backend saw %d cancels, want 1", stream, f.counts().cancelled-before)
		}
	}
}
