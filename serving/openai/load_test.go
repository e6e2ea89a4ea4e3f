package openai

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLoad: 200 concurrent streaming clients on loopback, 600 requests
// against a backend that admits 64 at a time. Every request completes
// with exactly its own text (each prompt names its request, and the fake
// echoes it) or is refused with 429 and Retry-After; every tenth client
// hangs up after its first chunk. Afterwards the backend holds nothing,
// the metrics count what happened, and the goroutine count is back to
// where it started.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("200 clients, 600 requests (about 2 s)")
	}
	const clients, perClient = 200, 3
	goroutines := runtime.NumGoroutine()
	f := newFake()
	f.limit, f.delay, f.window = 64, 200*time.Microsecond, 4096
	s := New(f, Config{})
	ts := httptest.NewServer(s)
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}

	results := make([][perClient]loadOutcome, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perClient {
				id := c*perClient + k
				results[c][k] = loadRequest(client, ts.URL, id)
			}
		}()
	}
	wg.Wait()

	var ok, refused, hungUp int
	for c := range clients {
		for k, o := range results[c] {
			id := c*perClient + k
			prompt, max := loadPrompt(id)
			switch {
			case o.err != nil:
				t.Errorf("request %d: %v", id, o.err)
			case o.hungUp:
				hungUp++
			case o.status == 429:
				refused++
				if o.retry == "" || !o.errorBody {
					t.Errorf("request %d: 429 without Retry-After or an error body", id)
				}
			case o.status == 200:
				ok++
				want := strings.Repeat(prompt, max/len(prompt)+1)[:max]
				if o.text != want || o.finish != "length" || !o.done || o.usage == nil ||
					*o.usage != (Usage{len(prompt), max, len(prompt) + max}) {
					t.Errorf("request %d: text %q finish %q [DONE] %v usage %+v; want %q, length, [DONE], %d + %d",
						id, o.text, o.finish, o.done, o.usage, want, len(prompt), max)
				}
			default:
				t.Errorf("request %d: status %d", id, o.status)
			}
		}
	}
	t.Logf("%d completed, %d refused (429), %d hung up", ok, refused, hungUp)
	if ok == 0 || refused == 0 || hungUp == 0 {
		t.Errorf("%d completed, %d refused, %d hung up: want some of each (the load does not exercise the server)", ok, refused, hungUp)
	}
	waitFree(t, f)
	text := scrape(t, ts.URL)
	// A request whose client hung up may still have finished on the
	// server (its chunks were in the socket's buffers): it counts as
	// length there, so only the sum is exact.
	length := metricValue(text, `vllm:request_success_total{finished_reason="length",model_name="fake-echo"}`)
	abort := metricValue(text, `vllm:request_success_total{finished_reason="abort",model_name="fake-echo"}`)
	if length < float64(ok) || length+abort != float64(ok+hungUp) || abort < 1 {
		t.Errorf("request_success_total: length %v, abort %v; want length ≥ %d completed, length + abort = %d, some aborted",
			length, abort, ok, ok+hungUp)
	}
	if got := metricValue(text, `http_requests_total{handler="/v1/completions",status="429"}`); got != float64(refused) {
		t.Errorf("429s counted %v, want %d", got, refused)
	}
	ts.Close()
	tr.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the load, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}
}

// loadOutcome is what a load client saw of one request.
type loadOutcome struct {
	status                  int
	text, finish, retry     string
	usage                   *Usage
	hungUp, done, errorBody bool
	err                     error
}

// loadPrompt is request id's prompt, which names it, and its max_tokens.
func loadPrompt(id int) (string, int) {
	return fmt.Sprintf("<req %d>", id), 20 + id%37
}

// loadRequest sends request id as a streaming completion and reads it
// whole (or, every tenth, hangs up after the first chunk).
func loadRequest(client *http.Client, url string, id int) (o loadOutcome) {
	prompt, max := loadPrompt(id)
	hangUp := id%10 == 3
	if hangUp {
		max = 2000 // long enough that it rarely finishes before the hang-up
	}
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": max, "stream": true,
		"stream_options": map[string]bool{"include_usage": true}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(string(body)))
	resp, err := client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		o.retry, o.errorBody = resp.Header.Get("Retry-After"), strings.Contains(string(data), `"error"`)
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, found := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case sc.Text() == "":
			continue
		case !found:
			o.err = fmt.Errorf("line %q is not a data line", sc.Text())
			return o
		case line == "[DONE]":
			o.done = true
			continue
		}
		var c chunkJSON
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			o.err = fmt.Errorf("chunk %q: %v", line, err)
			return o
		}
		if c.Usage != nil {
			o.usage = c.Usage
			continue
		}
		o.text += c.Choices[0].Text
		if c.Choices[0].FinishReason != nil {
			o.finish = *c.Choices[0].FinishReason
		}
		if hangUp {
			o.hungUp = true
			cancel()
			return o
		}
	}
	if err := sc.Err(); err != nil {
		o.err = err
	}
	return o
}
