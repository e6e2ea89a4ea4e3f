package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"gptlab/serving/openai"
)

// letters is a backend over the 26 lowercase letters whose "model" writes
// the alphabet onward from the prompt's last letter.
type letters struct{}

func (letters) ModelID() string    { return "alphabet" }
func (letters) ContextWindow() int { return 64 }
func (letters) Vocab() int         { return 26 }
func (letters) Stats() openai.Stats {
	return openai.Stats{}
}

func (letters) Encode(text string) ([]int32, error) {
	var ids []int32
	for i, r := range []rune(text) {
		if r < 'a' || r > 'z' {
			return nil, &openai.VocabError{Char: r, Pos: i}
		}
		ids = append(ids, r-'a')
	}
	return ids, nil
}

func (letters) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteByte(byte('a' + id))
	}
	return b.String()
}

func (letters) Generate(ctx context.Context, req openai.GenerateRequest) (<-chan openai.Token, error) {
	ch := make(chan openai.Token)
	go func() {
		defer close(ch)
		next := req.Prompt[len(req.Prompt)-1]
		for range req.MaxTokens {
			next = (next + 1) % 26
			select {
			case ch <- openai.Token{ID: next}:
			case <-ctx.Done():
				ch <- openai.Token{Err: ctx.Err()}
				return
			}
		}
		ch <- openai.Token{Finish: openai.FinishLength}
	}()
	return ch, nil
}

func Example() {
	srv := httptest.NewServer(openai.New(letters{}, openai.Config{}))
	defer srv.Close()
	for _, body := range []string{
		`{"model":"alphabet","prompt":"abc","max_tokens":5}`,
		`{"prompt":"w","max_tokens":6,"stop":"z"}`,
		`{"prompt":"aBc"}`,
	} {
		resp, err := http.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out := string(data)
		if i := strings.Index(out, `"created"`); i >= 0 { // a timestamp: not reproducible
			j := strings.Index(out[i:], ",")
			out = out[:i] + `"created":…` + out[i+j:]
		}
		fmt.Print(resp.StatusCode, " ", out)
	}
	// Output:
	// 200 {"id":"cmpl-1","object":"text_completion","created":…,"model":"alphabet","choices":[{"index":0,"text":"defgh","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}
	// 200 {"id":"cmpl-2","object":"text_completion","created":…,"model":"alphabet","choices":[{"index":0,"text":"xy","logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}
	// 400 {"error":{"message":"prompt: character 'B' (U+0042) at position 1 is not in the model's vocabulary","type":"invalid_request_error","param":"prompt","code":"invalid_prompt"}}
}
