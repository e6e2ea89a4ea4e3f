package openai

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveLoopback serves s on a loopback port.
func serveLoopback(t *testing.T, s *Server) (url string, served chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served = make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	return "http://" + l.Addr().String(), served
}

// TestShutdown: within the drain time a request in flight finishes whole;
// past it, it is cancelled, its stream ends with an error event and
// [DONE], and the backend holds nothing; either way the listener closes.
func TestShutdown(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tokens    int
		drain     time.Duration
		cancelled int
	}{
		{"finishes within the drain", 30, 10 * time.Second, 0},
		{"cancelled past the drain", 2000, 50 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.delay = 2 * time.Millisecond
			f.window = 4096
			s := New(f, Config{})
			url, served := serveLoopback(t, s)
			resp, err := http.Post(url+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt":"ab","stream":true,"max_tokens":`+strconv.Itoa(tc.tokens)+`}`))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan []string, 1)
			go func() { defer resp.Body.Close(); got <- events(t, resp.Body) }()
			for f.holding() == 0 {
				time.Sleep(time.Millisecond)
			}
			cancelled, err := s.Shutdown(tc.drain)
			if err != nil || cancelled != tc.cancelled {
				t.Errorf("Shutdown(%v) = %d, %v; want %d cancelled", tc.drain, cancelled, err, tc.cancelled)
			}
			ev := <-got
			if ev[len(ev)-1] != "[DONE]" {
				t.Errorf("the stream ends with %q, want [DONE]", ev[len(ev)-1])
			}
			text := ""
			for _, e := range ev[:len(ev)-1] {
				if strings.Contains(e, `"error"`) {
					continue
				}
				text += decodeChunk(t, e).Choices[0].Text
			}
			errored := strings.Contains(ev[len(ev)-2], `"shutting_down"`)
			if (tc.cancelled == 0) != (len(text) == tc.tokens) || errored != (tc.cancelled > 0) {
				t.Errorf("%d of %d tokens, error event %v", len(text), tc.tokens, errored)
			}
			waitFree(t, f)
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
			}
			if _, err := http.Get(url + "/health"); err == nil {
				t.Errorf("the listener still accepts after Shutdown")
			}
		})
	}
}

// TestDraining: a request that reaches a draining server gets 503.
func TestDraining(t *testing.T) {
	f := newFake()
	s := New(f, Config{})
	ts := httptest.NewServer(s)
	defer ts.Close()
	if _, err := s.Shutdown(time.Second); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/completions", "/health"} {
		var resp *http.Response
		var err error
		if path == "/health" {
			resp, err = http.Get(ts.URL + path)
		} else {
			resp, err = http.Post(ts.URL+path, "application/json", strings.NewReader(`{"prompt":"a"}`))
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(string(body), "shutting_down") {
			t.Errorf("%s while draining: %d %s, want 503 shutting_down", path, resp.StatusCode, body)
		}
	}
}
