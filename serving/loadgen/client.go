package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"gptlab/serving"
)

// ServedModel asks the server at url (its base, or its /v1/completions)
// for the id of the first model GET /v1/models lists.
func ServedModel(ctx context.Context, url string) (string, error) {
	client := &http.Client{}
	defer client.CloseIdleConnections()
	return firstModel(ctx, client, baseURL(url))
}

// baseURL is url without a trailing /v1/completions or slash.
func baseURL(url string) string {
	return strings.TrimSuffix(strings.TrimSuffix(url, "/"), "/v1/completions")
}

// firstModel asks GET /v1/models for the served model's id.
func firstModel(ctx context.Context, client *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("loadgen: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("loadgen: GET %s/v1/models: %w", base, err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("loadgen: GET %s/v1/models: status %d", base, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("loadgen: GET %s/v1/models: no model in the answer (%v)", base, err)
	}
	return list.Data[0].ID, nil
}

// maxLine bounds one line of the stream.
const maxLine = 1 << 20

// send posts one request and reads its stream into o.
func send(ctx context.Context, client *http.Client, url string, body map[string]any, r *serving.Request,
	timeout time.Duration, now func() float64, o *Outcome) {
	data, _ := json.Marshal(body)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if timeout > 0 {
		var c2 context.CancelFunc
		rctx, c2 = context.WithTimeout(rctx, timeout)
		defer c2()
	}
	o.Sent = now()
	var byWorkload atomic.Bool
	if r.Cancels() { // the workload's client cancel, as long after sending as after arrival
		t := time.AfterFunc(seconds(r.Cancel-r.Arrival), func() { byWorkload.Store(true); cancel() })
		defer t.Stop()
	}
	defer func() { o.End = now() }()
	req, err := http.NewRequestWithContext(rctx, "POST", url, bytes.NewReader(data))
	if err != nil {
		o.Err = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		o.Err, o.Cancelled = cause(rctx, err, byWorkload.Load()), byWorkload.Load()
		return
	}
	defer resp.Body.Close()
	o.Status = resp.StatusCode
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		o.Err = fmt.Sprintf("status %d: %s", resp.StatusCode, errorMessage(msg))
		return
	}
	done := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		payload, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue // event:, id:, retry: lines carry no data
		}
		payload = strings.TrimSpace(payload)
		if payload == "[DONE]" {
			done = true
			continue
		}
		t := now()
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			o.Err = fmt.Sprintf("a chunk is not JSON: %v", err)
			return
		}
		switch {
		case c.Error != nil:
			o.Err = "stream error: " + c.Error.Message
			return
		case len(c.Choices) > 0:
			o.Chunks = append(o.Chunks, t)
			o.Text += c.Choices[0].Text
		}
		if c.Usage != nil {
			o.PromptTokens, o.OutputTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		o.Err, o.Cancelled = cause(rctx, err, byWorkload.Load()), byWorkload.Load()
		return
	}
	switch {
	case !done:
		o.Err = "the stream ended without data: [DONE]"
	case len(o.Chunks) == 0:
		o.Err = "the stream carried no token"
	}
	if o.PromptTokens == 0 {
		o.PromptTokens = r.Prompt
	}
	if o.OutputTokens == 0 {
		o.OutputTokens = len(o.Chunks)
	}
}

// cause names why a request broke off.
func cause(ctx context.Context, err error, cancelled bool) string {
	switch {
	case cancelled:
		return "cancelled by the workload"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timed out"
	}
	return err.Error()
}

// errorMessage is an error body's message, or the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(string(body))
}
