package cli

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

	"gptlab/engine"
	"gptlab/models"
	"gptlab/serving/openai"
)

// TestServeEngineUnderLoad: 200 concurrent streaming clients on loopback
// against the engine behind the HTTP server, 400 requests over 20
// prompts. Each completed request's greedy text equals its prompt's text
// served alone (nothing cut or mixed); the others were refused with 429 or
// hung up by their client; afterwards every KV block is free, nothing runs
// or waits, and the goroutine count is back to its start. The engine holds
// 12 requests (4 running, 8 waiting) against the 200 clients' first
// wave, so that a fast machine still refuses some: with 16 and 48 one CI
// run served all 360 it did not hang up.
func TestServeEngineUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("200 clients against the engine")
	}
	const clients, perClient, prompts, maxTokens = 200, 2, 20, 10
	goroutines := runtime.NumGoroutine()
	mc, _ := models.Preset("tiny")
	tok, err := models.TokenizerFromChars(" abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	mc.Vocab = tok.Vocab()
	e, err := engine.New(models.NewParams(mc, 3), engine.Config{BlockSize: 4, Blocks: 96, Caching: true, Policy: "continuous",
		MaxSeqs: 4, MaxTokens: 64, Chunked: true, MaxWaiting: 8})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()
	ts := httptest.NewServer(openai.New(engine.NewBackend(e, tok, "tiny"), openai.Config{}))
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}

	promptOf := func(k int) string { return fmt.Sprintf("req %c%c", 'a'+k%26, 'a'+k/26) }
	alone := make([]string, prompts)
	for k := range alone {
		o := streamOnce(client, ts.URL, promptOf(k), maxTokens, false)
		if o.status != 200 || o.err != nil || len(o.text) != maxTokens {
			t.Fatalf("prompt %d alone: %+v", k, o)
		}
		alone[k] = o.text
	}
	results := make([]engineLoadOutcome, clients*perClient)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perClient {
				id := c*perClient + j
				results[id] = streamOnce(client, ts.URL, promptOf(id%prompts), maxTokens, id%10 == 7)
			}
		}()
	}
	wg.Wait()
	var ok, refused, hungUp int
	for id, o := range results {
		switch {
		case o.err != nil:
			t.Errorf("request %d: %v", id, o.err)
		case o.hungUp:
			hungUp++
		case o.status == 429:
			refused++
		case o.status == 200 && o.text == alone[id%prompts] && o.finish == "length" && o.done && o.tokens == maxTokens:
			ok++
		default:
			t.Errorf("request %d: %+v, want %q as served alone", id, o, alone[id%prompts])
		}
	}
	t.Logf("%d completed, %d refused (429), %d hung up", ok, refused, hungUp)
	if ok == 0 || refused == 0 {
		t.Errorf("%d completed, %d refused: the load does not reach the queue's limit", ok, refused)
	}
	deadline := time.Now().Add(10 * time.Second)
	for st := e.Stats(); st.Running+st.Waiting > 0 || st.KVUsage > 0; st = e.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after the load the engine holds %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ts.Close()
	tr.CloseIdleConnections()
	stopRun()
	if err := <-ran; err != nil {
		t.Errorf("engine Run: %v", err)
	}
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the load, %d before", n, goroutines)
	}
}

type engineLoadOutcome struct {
	status       int
	text, finish string
	tokens       int
	done, hungUp bool
	err          error
}

// streamOnce sends one greedy streaming completion and reads it (or hangs
// up after its first chunk).
func streamOnce(client *http.Client, url, prompt string, maxTokens int, hangUp bool) (o engineLoadOutcome) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": true,
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
	if o.status = resp.StatusCode; o.status != 200 {
		io.Copy(io.Discard, resp.Body)
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, found := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !found:
			continue
		case d == "[DONE]":
			o.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *openai.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			o.err = err
			return o
		}
		if c.Usage != nil {
			o.tokens = c.Usage.CompletionTokens
		}
		if len(c.Choices) == 0 {
			continue
		}
		o.text += c.Choices[0].Text
		if f := c.Choices[0].FinishReason; f != nil {
			o.finish = *f
		}
		if hangUp {
			o.hungUp = true
			return o
		}
	}
	o.err = sc.Err()
	return o
}
