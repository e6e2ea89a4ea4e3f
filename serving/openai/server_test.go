package openai

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// post sends body to path and returns the status and the body.
func post(t *testing.T, url, path, body string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(data)
}

// events reads a server-sent event stream: the data of each event.
func events(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("stream line %q is not a data line", line)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return out
}

// streamed posts a streaming request and returns its events.
func streamed(t *testing.T, url, path, body string) []string {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: status %d, type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return events(t, resp.Body)
}

type chunkJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int    `json:"index"`
		Text    string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

func decodeChunk(t *testing.T, s string) chunkJSON {
	t.Helper()
	var c chunkJSON
	if err := json.Unmarshal([]byte(s), &c); err != nil {
		t.Fatalf("chunk %q: %v", s, err)
	}
	return c
}

func newTestServer(t *testing.T, f *fake) (*Server, *httptest.Server) {
	t.Helper()
	s := New(f, Config{})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// waitFree waits until the fake holds nothing (its goroutines end just
// after the last event is read).
func waitFree(t *testing.T, f *fake) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.holding() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the backend still holds %d requests", f.holding())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCompletion(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	code, _, body := post(t, ts.URL, "/v1/completions", `{"model":"fake-echo","prompt":"abc","max_tokens":7,"temperature":0}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	c := decodeChunk(t, body)
	if c.Object != "text_completion" || c.Model != "fake-echo" || !strings.HasPrefix(c.ID, "cmpl-") || c.Created == 0 {
		t.Errorf("envelope %+v: want object text_completion, model fake-echo, id cmpl-…, created set", c)
	}
	if len(c.Choices) != 1 || c.Choices[0].Text != "abcabca" || *c.Choices[0].FinishReason != "length" || string(c.Choices[0].Logprobs) != "null" {
		t.Errorf("choices %s: want one choice \"abcabca\", finish length, logprobs null", body)
	}
	if *c.Usage != (Usage{PromptTokens: 3, CompletionTokens: 7, TotalTokens: 10}) {
		t.Errorf("usage %+v, want 3 + 7 = 10", *c.Usage)
	}
	if f.lastRequest().Temperature != 0 || f.lastRequest().TopP != 1 || f.lastRequest().MaxTokens != 7 {
		t.Errorf("backend got %+v, want temperature 0, top_p 1, max_tokens 7", f.last)
	}
	waitFree(t, f)
}

func TestCompletionStream(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	ev := streamed(t, ts.URL, "/v1/completions",
		`{"prompt":["xy","pqr"],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"seed":7}`)
	if ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", ev[len(ev)-1])
	}
	texts := map[int]string{}
	finishes := map[int]string{}
	usage := decodeChunk(t, ev[len(ev)-2])
	for _, e := range ev[:len(ev)-2] {
		c := decodeChunk(t, e)
		if c.Object != "text_completion" || len(c.Choices) != 1 || c.Usage != nil {
			t.Fatalf("chunk %s: want one choice of a text_completion, no usage", e)
		}
		ch := c.Choices[0]
		if _, done := finishes[ch.Index]; done {
			t.Errorf("choice %d has a chunk after its finish", ch.Index)
		}
		texts[ch.Index] += ch.Text
		if ch.FinishReason != nil {
			finishes[ch.Index] = *ch.FinishReason
		}
	}
	if texts[0] != "xyxyx" || texts[1] != "pqrpq" || finishes[0] != "length" || finishes[1] != "length" {
		t.Errorf("texts %v finishes %v, want xyxyx and pqrpq, both length", texts, finishes)
	}
	if len(usage.Choices) != 0 || usage.Usage == nil || *usage.Usage != (Usage{5, 10, 15}) {
		t.Errorf("usage chunk %s: want no choices and usage 5 + 10 = 15", ev[len(ev)-2])
	}
	if f.lastRequest().Seed != 7 {
		t.Errorf("backend seed %d, want the request's 7", f.lastRequest().Seed)
	}
	waitFree(t, f)
}

func TestStopString(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	for _, tc := range []struct {
		name, body, want, finish string
	}{
		{"stop spans tokens", `{"prompt":"abcdef","max_tokens":20,"stop":"cde"}`, "ab", "stop"},
		{"earliest of several", `{"prompt":"abcdef","max_tokens":20,"stop":["f","cd"]}`, "ab", "stop"},
		{"in the second round", `{"prompt":"abc","max_tokens":20,"stop":["ca"]}`, "ab", "stop"},
		{"a prefix held back, then released", `{"prompt":"abcabd","max_tokens":6,"stop":"abx"}`, "abcabd", "length"},
		{"absent", `{"prompt":"abc","max_tokens":4,"stop":["zz",""]}`, "abca", "length"},
		{"the model's end token", `{"prompt":"ab~","max_tokens":9}`, "ab", "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				var text, finish string
				if stream {
					ev := streamed(t, ts.URL, "/v1/completions", strings.TrimSuffix(tc.body, "}")+`,"stream":true}`)
					for _, e := range ev[:len(ev)-1] {
						c := decodeChunk(t, e)
						text += c.Choices[0].Text
						if c.Choices[0].FinishReason != nil {
							finish = *c.Choices[0].FinishReason
						}
					}
				} else {
					code, _, body := post(t, ts.URL, "/v1/completions", tc.body)
					if code != 200 {
						t.Fatalf("status %d: %s", code, body)
					}
					c := decodeChunk(t, body)
					text, finish = c.Choices[0].Text, *c.Choices[0].FinishReason
				}
				if text != tc.want || finish != tc.finish {
					t.Errorf("stream %v: text %q finish %s, want %q %s", stream, text, finish, tc.want, tc.finish)
				}
			}
			waitFree(t, f)
		})
	}
}

func TestChat(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	msgs := `"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"!"}]}]`
	prompt := ChatPrompt([]string{"system", "user"}, []string{"be brief", "hi!"})
	if prompt != "system: be brief\nuser: hi!\nassistant:" {
		t.Fatalf("ChatPrompt = %q", prompt)
	}
	code, _, body := post(t, ts.URL, "/v1/chat/completions", `{`+msgs+`,"max_completion_tokens":10}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	c := decodeChunk(t, body)
	m := c.Choices[0].Message
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || m == nil || m.Role != "assistant" || m.Content != prompt[:10] {
		t.Errorf("chat body %s: want a chat.completion whose message echoes %q", body, prompt[:10])
	}
	// the default max_tokens is the rest of the window
	code, _, body = post(t, ts.URL, "/v1/chat/completions", `{`+msgs+`}`)
	if c := decodeChunk(t, body); code != 200 || c.Usage.CompletionTokens != f.window-len(prompt) {
		t.Errorf("without max_tokens: status %d, %d tokens, want %d (the rest of the window)", code, c.Usage.CompletionTokens, f.window-len(prompt))
	}
	ev := streamed(t, ts.URL, "/v1/chat/completions", `{`+msgs+`,"max_tokens":4,"stream":true}`)
	var text string
	for i, e := range ev[:len(ev)-1] {
		c := decodeChunk(t, e)
		d := c.Choices[0].Delta
		if c.Object != "chat.completion.chunk" || d == nil || (i == 0) != (d.Role == "assistant") {
			t.Errorf("chunk %d %s: want a chat.completion.chunk delta, role only in the first", i, e)
		}
		if d != nil && d.Content != nil {
			text += *d.Content
		}
	}
	if text != prompt[:4] {
		t.Errorf("streamed chat text %q, want %q", text, prompt[:4])
	}
	waitFree(t, f)
}

func TestModelsHealth(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	resp, err := http.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object  string
			MaxModelLen int `json:"max_model_len"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "fake-echo" || list.Data[0].Object != "model" || list.Data[0].MaxModelLen != 256 {
		t.Errorf("/v1/models = %+v", list)
	}
	for path, want := range map[string]int{"/health": 200, "/nowhere": 404} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
		if want == 404 && !strings.Contains(string(data), `"error"`) {
			t.Errorf("GET %s: body %s, want an error body", path, data)
		}
	}
	code, _, body := post(t, ts.URL, "/v1/models", "{}")
	if code != 405 || !strings.Contains(body, `"error"`) {
		t.Errorf("POST /v1/models: %d %s, want 405 with an error body", code, body)
	}
}
