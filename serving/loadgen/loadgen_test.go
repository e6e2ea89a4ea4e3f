package loadgen

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gptlab/serving"
	"gptlab/serving/openai"
)

// TestSummaryByHand: the summary of outcomes with known times is the
// metrics computed by hand as benchmark_serving.py computes them.
func TestSummaryByHand(t *testing.T) {
	res := &Result{Outcomes: []Outcome{
		// sent at 0, chunks at 0.5, 0.6, 0.8: TTFT 0.5, ITL 0.1 and 0.2, E2E 0.8, TPOT 0.15
		{ID: 0, Sent: 0, Chunks: []float64{0.5, 0.6, 0.8}, PromptTokens: 4, OutputTokens: 3, End: 0.8},
		// sent at 1, one chunk at 1.2: TTFT 0.2, E2E 0.2, no TPOT
		{ID: 1, Sent: 1, Chunks: []float64{1.2}, PromptTokens: 2, OutputTokens: 1, End: 1.2},
		// refused and cancelled: counted, not in the latencies
		{ID: 2, Sent: 0.1, Status: 429, Err: "status 429: busy", End: 0.1},
		{ID: 3, Sent: 0.2, Chunks: []float64{0.3}, Err: "cancelled by the workload", Cancelled: true, End: 0.35},
	}}
	s := res.Summary(serving.SLO{TTFT: 0.3})
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Requests != 4 || s.Completed != 2 || s.Rejected != 1 || s.Cancelled != 1 || s.OutputTokens != 4 || s.InputTokens != 6 {
		t.Errorf("counts %+v", s)
	}
	near("TTFT mean", s.TTFT.Mean, 0.35)
	near("TTFT median", s.TTFT.Median, 0.35)
	near("TTFT p90", s.TTFT.P90, 0.2+0.9*0.3)
	near("E2E mean", s.E2E.Mean, 0.5)
	near("TPOT mean", s.TPOT.Mean, 0.15)
	near("ITL mean", s.ITL.Mean, 0.15)
	near("ITL p99", s.ITL.P99, 0.1+0.99*0.1)
	near("duration", s.Duration, 1.2)
	near("output throughput", s.OutputThroughput, 4/1.2)
	if s.GoodRequests != 1 {
		t.Errorf("%d requests meet TTFT ≤ 0.3 s, want 1", s.GoodRequests)
	}
	if f := res.Failures(); len(f) != 1 || f[0] != (Failure{"status 429: busy", 1}) {
		t.Errorf("failures %v, want one 429", f)
	}
}

// paced is a backend that writes the alphabet onward from the prompt's
// last letter, one token every delay, and admits limit requests at once.
type paced struct {
	delay time.Duration
	limit int
	mu    sync.Mutex
	held  int
}

func (p *paced) ModelID() string     { return "paced" }
func (p *paced) ContextWindow() int  { return 512 }
func (p *paced) Vocab() int          { return 26 }
func (p *paced) Stats() openai.Stats { return openai.Stats{} }
func (p *paced) Encode(s string) ([]int32, error) {
	var ids []int32
	for i, r := range []rune(s) {
		if r < 'a' || r > 'z' {
			return nil, &openai.VocabError{Char: r, Pos: i}
		}
		ids = append(ids, r-'a')
	}
	return ids, nil
}
func (p *paced) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte('a' + id)
	}
	return string(b)
}
func (p *paced) Generate(ctx context.Context, req openai.GenerateRequest) (<-chan openai.Token, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held >= p.limit {
		return nil, openai.ErrBusy
	}
	p.held++
	ch := make(chan openai.Token, req.MaxTokens+1)
	go func() {
		defer close(ch)
		defer func() { p.mu.Lock(); p.held--; p.mu.Unlock() }()
		next := req.Prompt[len(req.Prompt)-1]
		for range req.MaxTokens {
			select {
			case <-time.After(p.delay):
			case <-ctx.Done():
				ch <- openai.Token{Err: ctx.Err()}
				return
			}
			next = (next + 1) % 26
			ch <- openai.Token{ID: next}
		}
		ch <- openai.Token{Finish: openai.FinishLength}
	}()
	return ch, nil
}

func TestRunAgainstServer(t *testing.T) {
	b := &paced{delay: 2 * time.Millisecond, limit: 1000}
	ts := httptest.NewServer(openai.New(b, openai.Config{}))
	defer ts.Close()
	w := serving.Workload{N: 40, Rate: 400, Seed: 3,
		Prompt: serving.Lengths{Kind: serving.UniformLength, Lo: 4, Hi: 40}, Output: serving.Lengths{Kind: serving.FixedLength, Lo: 8, Hi: 8}}
	reqs, err := w.Generate()
	if err != nil {
		t.Fatal(err)
	}
	reqs[5].Cancel = reqs[5].Arrival + 0.005 // cancelled by the workload after about two tokens
	res, err := Run(context.Background(), Config{URL: ts.URL, Requests: reqs, Alphabet: "abc", Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model != "paced" {
		t.Errorf("model %q, want the server's (from /v1/models)", res.Model)
	}
	for i, o := range res.Outcomes {
		if i == 5 {
			if !o.Cancelled {
				t.Errorf("request 5: %+v, want cancelled by the workload", o)
			}
			continue
		}
		if !o.Completed() || o.OutputTokens != 8 || o.PromptTokens != reqs[i].Prompt || len(o.Chunks) != 8 || len(o.Text) != 8 {
			t.Errorf("request %d: %+v, want 8 tokens of 8 chunks and a prompt of %d", i, o, reqs[i].Prompt)
			continue
		}
		// The server makes a token every delay at the earliest, so the first
		// comes a delay and the last 8 delays after the request at the
		// earliest. The gaps between chunks have no such bound: a handler
		// kept off the CPU drains the tokens made meanwhile in one burst
		// (seen under qemu-user in CI: a median gap of 55 µs at a 2 ms pace).
		if o.Sent < o.Arrival-1e-3 || o.Chunks[0]-o.Sent < b.delay.Seconds() || o.Chunks[7]-o.Sent < 8*b.delay.Seconds() {
			t.Errorf("request %d: sent at %.4f for an arrival at %.4f, first token %.4f after, last %.4f after",
				i, o.Sent, o.Arrival, o.Chunks[0]-o.Sent, o.Chunks[len(o.Chunks)-1]-o.Sent)
		}
	}
	s := res.Summary(serving.SLO{})
	if s.Completed != 39 || s.Cancelled != 1 || s.OutputTokens != 39*8 || s.ITL.N != 39*7 || s.TPOT.N != 39 || s.E2E.Median < 8*b.delay.Seconds() {
		t.Errorf("summary %+v: want 39 completed, 1 cancelled, 39×8 tokens, 39×7 gaps, 39 TPOTs, E2E at least 8 tokens' pace", s)
	}
}

// TestFailuresCounted: refusals, a stream cut before [DONE], an error
// event and a dead server are each counted with their cause.
func TestFailuresCounted(t *testing.T) {
	var n int
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"data":[{"id":"m"}]}`)
			return
		}
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k % 3 {
		case 0:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"error":{"message":"queue full"}}`)
		case 1:
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n") // no [DONE]
		case 2:
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n")
		}
	}))
	defer ts.Close()
	reqs := make([]serving.Request, 6)
	for i := range reqs {
		reqs[i] = serving.Request{ID: i, Arrival: float64(i) * 0.001, Prompt: 3, Output: 2}
	}
	res, err := Run(context.Background(), Config{URL: ts.URL + "/v1/completions", Requests: reqs})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Failures()
	got := fmt.Sprint(f)
	for _, want := range []string{"2 × status 429: queue full", "2 × the stream ended without data: [DONE]", "2 × stream error: boom"} {
		if !strings.Contains(got, want) {
			t.Errorf("failures %s lack %q", got, want)
		}
	}
	if s := res.Summary(serving.SLO{}); s.Rejected != 6 || s.Completed != 0 || s.Requests != 6 {
		t.Errorf("summary %+v: want all 6 counted as failed", s)
	}
	ts.Close()
	if _, err := Run(context.Background(), Config{URL: ts.URL, Model: "m", Requests: reqs[:1]}); err != nil {
		t.Fatal(err)
	} // a dead server: the run completes, its request failed
}

// TestPromptsReproducible: the same seed gives the same bodies; token
// prompts have exactly the workload's lengths and share a group's prefix.
func TestPromptsReproducible(t *testing.T) {
	cfg := &Config{Tokens: true, Vocab: 50, Seed: 4, Model: "m"}
	a := serving.Request{ID: 1, Prompt: 10, Output: 3, Group: 2, PrefixLen: 6}
	b := serving.Request{ID: 2, Prompt: 12, Output: 3, Group: 2, PrefixLen: 6}
	pa, pb := requestBody(cfg, &a)["prompt"].([]int), requestBody(cfg, &b)["prompt"].([]int)
	if len(pa) != 10 || len(pb) != 12 || fmt.Sprint(pa[:6]) != fmt.Sprint(pb[:6]) || fmt.Sprint(pa[6:]) == fmt.Sprint(pb[6:10]) {
		t.Errorf("prompts %v and %v: want lengths 10 and 12, the first 6 shared, the rest not", pa, pb)
	}
	if again := requestBody(cfg, &a)["prompt"].([]int); fmt.Sprint(again) != fmt.Sprint(pa) {
		t.Errorf("the same seed drew %v, then %v", pa, again)
	}
	cfg.Seed = 5
	if other := requestBody(cfg, &a)["prompt"].([]int); fmt.Sprint(other) == fmt.Sprint(pa) {
		t.Errorf("seeds 4 and 5 drew the same prompt %v", pa)
	}
}
