package loadgen_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"gptlab/serving"
	"gptlab/serving/loadgen"
	"gptlab/serving/openai"
)

// echo is a backend that answers each prompt with its own first token
// repeated: enough to drive the load generator in an example.
type echo struct{}

func (echo) ModelID() string     { return "echo" }
func (echo) ContextWindow() int  { return 128 }
func (echo) Vocab() int          { return 26 }
func (echo) Stats() openai.Stats { return openai.Stats{} }
func (echo) Encode(s string) ([]int32, error) {
	ids := make([]int32, 0, len(s))
	for i, r := range []rune(s) {
		if r < 'a' || r > 'z' {
			return nil, &openai.VocabError{Char: r, Pos: i}
		}
		ids = append(ids, r-'a')
	}
	return ids, nil
}
func (echo) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte('a' + id)
	}
	return string(b)
}
func (echo) Generate(ctx context.Context, req openai.GenerateRequest) (<-chan openai.Token, error) {
	ch := make(chan openai.Token, req.MaxTokens+1)
	for range req.MaxTokens {
		ch <- openai.Token{ID: req.Prompt[0]}
	}
	ch <- openai.Token{Finish: openai.FinishLength}
	close(ch)
	return ch, nil
}

func Example() {
	srv := httptest.NewServer(openai.New(echo{}, openai.Config{}))
	defer srv.Close()
	reqs, _ := serving.Workload{N: 20, Rate: 200, Seed: 1,
		Prompt: serving.Lengths{Kind: serving.UniformLength, Lo: 4, Hi: 12},
		Output: serving.Lengths{Kind: serving.FixedLength, Lo: 6, Hi: 6}}.Generate()
	res, err := loadgen.Run(context.Background(), loadgen.Config{URL: srv.URL, Requests: reqs, Alphabet: "abc", Seed: 7})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := res.Summary(serving.SLO{})
	fmt.Println("model:", res.Model)
	fmt.Println("completed:", s.Completed, "of", s.Requests, "output tokens:", s.OutputTokens, "gaps:", s.ITL.N)
	fmt.Println("request 0 got:", res.Outcomes[0].Text)
	// Output:
	// model: echo
	// completed: 20 of 20 output tokens: 120 gaps: 100
	// request 0 got: aaaaaa
}
