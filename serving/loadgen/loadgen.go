// Package loadgen is a client-side serving benchmark, like vLLM's
// benchmarks/benchmark_serving.py: it replays a workload (serving's
// generators or a trace: arrival times, prompt and output lengths, client
// cancels) against any OpenAI-compatible /v1/completions endpoint,
// streaming, and measures each request as the client sees it: time to
// first token, the gaps between chunks, end-to-end latency, tokens from
// the usage the server reports. The summary is serving's Recorder, so the
// metrics (TTFT, TPOT, ITL, E2E percentiles, throughputs, goodput at
// SLOs) are defined once, as vLLM defines them. A request that fails (a
// refusal, a cut stream, a transport error) is counted, with its cause,
// and never dropped.
//
// It knows no model and no command: the bench serve command composes it
// into a report.
package loadgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gptlab/serving"
)

// Config is one benchmark run.
type Config struct {
	// URL is the server's base URL (http://127.0.0.1:8000); a URL ending
	// in /v1/completions is taken as it is.
	URL string
	// Model is sent as "model"; "" asks GET /v1/models for the first one.
	Model string
	// Requests are the workload, arrivals in seconds from the start (any
	// order; they are sent in arrival order). Output is max_tokens.
	Requests []serving.Request
	// Prompts: Tokens sends each prompt as token ids below Vocab (exact
	// lengths against any tokenizer); otherwise as text of Alphabet's
	// characters, one token each on a character-level model.
	Tokens   bool
	Vocab    int
	Alphabet string
	// Temperature is sent with every request (0: greedy).
	Temperature float64
	Seed        uint64 // the prompts' contents, and each request's "seed"
	// MaxConcurrency bounds the requests in flight (0: unbounded); a
	// request waits for a slot and its latencies start when it is sent.
	MaxConcurrency int
	// Timeout bounds one request (0: none).
	Timeout time.Duration
	Client  *http.Client // nil: a client of its own
}

// DefaultAlphabet is the prompts' characters in text mode: lowercase
// letters and the space, in the vocabulary of the embedded corpus and of
// Shakespeare.
const DefaultAlphabet = " abcdefghijklmnopqrstuv"

// Outcome is what the client saw of one request. Times are seconds from
// the start of the run.
type Outcome struct {
	ID        int
	Arrival   float64 // when the workload sends it
	Sent      float64 // when it was sent (after a concurrency slot)
	Status    int     // HTTP status, 0 without a response
	Err       string  // why it did not complete ("" when it did)
	Cancelled bool    // the workload cancelled it (serving.Request.Cancel)
	// Chunks are the arrival times of the stream's chunks that carried a
	// choice (each a token, but where the server joins tokens, as around a
	// stop string).
	Chunks       []float64
	PromptTokens int // from the server's usage (the workload's when it sends none)
	OutputTokens int // from the server's usage (the chunks when it sends none)
	Text         string
	End          float64 // when the response ended
}

// Completed reports whether the request completed.
func (o *Outcome) Completed() bool { return o.Err == "" && !o.Cancelled }

// Result is a run: every request's outcome, in ID order, and the summary.
type Result struct {
	Model    string
	Outcomes []Outcome
	Wall     float64 // seconds from the start to the last response's end
}

// Run sends the workload and waits for every response. Cancelling ctx
// cancels the requests in flight and returns ctx's error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Requests) == 0 {
		return nil, fmt.Errorf("loadgen: no requests")
	}
	if cfg.Tokens && cfg.Vocab < 1 {
		return nil, fmt.Errorf("loadgen: token prompts need a vocabulary size, got %d", cfg.Vocab)
	}
	if !cfg.Tokens && cfg.Alphabet == "" {
		cfg.Alphabet = DefaultAlphabet
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
		defer client.CloseIdleConnections()
	}
	base := baseURL(cfg.URL)
	url := base + "/v1/completions"
	if cfg.Model == "" {
		m, err := firstModel(ctx, client, base)
		if err != nil {
			return nil, err
		}
		cfg.Model = m
	}
	order := make([]int, len(cfg.Requests))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpFloat(cfg.Requests[a].Arrival, cfg.Requests[b].Arrival)
	})
	res := &Result{Model: cfg.Model, Outcomes: make([]Outcome, len(cfg.Requests))}
	var sem chan struct{}
	if cfg.MaxConcurrency > 0 {
		sem = make(chan struct{}, cfg.MaxConcurrency)
	}
	start := time.Now()
	since := func() float64 { return time.Since(start).Seconds() }
	var wg sync.WaitGroup
	for _, i := range order {
		r := cfg.Requests[i]
		if d := time.Until(start.Add(seconds(r.Arrival))); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		o := &res.Outcomes[i]
		o.ID, o.Arrival = r.ID, r.Arrival
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem != nil {
				select {
				case sem <- struct{}{}:
					defer func() { <-sem }()
				case <-ctx.Done():
					o.Err = "interrupted"
					return
				}
			}
			body := requestBody(&cfg, &r)
			send(ctx, client, url, body, &r, cfg.Timeout, since, o)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range res.Outcomes {
		res.Wall = max(res.Wall, res.Outcomes[i].End)
	}
	return res, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// requestBody is request r's JSON: a prompt of r.Prompt tokens (a shared
// prefix from its group's stream, the rest from its own), max_tokens
// r.Output, streaming with usage, ignore_eos so that it runs to length.
func requestBody(cfg *Config, r *serving.Request) map[string]any {
	var ids []int
	var text strings.Builder
	alphabet := []rune(cfg.Alphabet)
	draw := func(rng *rand.Rand) {
		if cfg.Tokens {
			ids = append(ids, rng.IntN(cfg.Vocab))
		} else {
			text.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
	}
	group := rand.New(rand.NewPCG(cfg.Seed, 1<<40+uint64(r.Group)))
	own := rand.New(rand.NewPCG(cfg.Seed, uint64(r.ID)))
	for k := range r.Prompt {
		if k < r.PrefixLen {
			draw(group)
		} else {
			draw(own)
		}
	}
	body := map[string]any{
		"model": cfg.Model, "max_tokens": r.Output, "temperature": cfg.Temperature,
		"seed": (cfg.Seed + uint64(r.ID)) & (1<<62 - 1), "ignore_eos": true,
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	}
	if cfg.Tokens {
		body["prompt"] = ids
	} else {
		body["prompt"] = text.String()
	}
	return body
}
