package openai

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config holds the server's limits; the zero value takes the defaults.
type Config struct {
	// MaxBodyBytes bounds a request body; a larger one gets 413.
	// 0: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RetryAfter is what a 429 tells the client to wait (whole seconds,
	// at least 1). 0: one second.
	RetryAfter time.Duration
}

// DefaultMaxBodyBytes is the default body limit: 1 MiB, far above any
// prompt that fits a small model's context window.
const DefaultMaxBodyBytes = 1 << 20

// Server is an OpenAI-compatible HTTP server over a Backend. It is an
// http.Handler (for httptest or a mux of one's own) and serves a listener
// itself with Serve, which Shutdown stops.
type Server struct {
	b       Backend
	cfg     Config
	mux     *http.ServeMux
	m       *metrics
	created int64 // Unix time the server was made: /v1/models' "created"

	base     context.Context // every request's context derives from it
	abortAll context.CancelFunc
	inflight sync.WaitGroup // generation requests being served; Add only under mu while not draining
	active   atomic.Int64   // the same count, readable
	draining atomic.Bool
	requests atomic.Uint64 // request numbers: ids, and the seed of a request without one

	mu   sync.Mutex
	http *http.Server // set by Serve
}

// New makes a server for b.
func New(b Backend, cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = time.Second
	}
	s := &Server{b: b, cfg: cfg, mux: http.NewServeMux(), m: newMetrics(b), created: time.Now().Unix()}
	s.base, s.abortAll = context.WithCancel(context.Background())
	s.mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, parseCompletion) })
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.generate(w, r, parseChat) })
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", s.m.handler())
	return s
}

// ServeHTTP routes a request; an unknown path or method gets OpenAI's
// error body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r) // the mux's 404 or 405, rewritten as an error body
		return
	}
	h.ServeHTTP(w, r)
}

// statusWriter turns the mux's plain-text 404 and 405 into error bodies.
type statusWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	msg := "no such endpoint; this server has POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health and GET /metrics"
	if code == http.StatusMethodNotAllowed {
		msg = "method not allowed on this endpoint (Allow: " + w.Header().Get("Allow") + ")"
	}
	w.Header().Del("X-Content-Type-Options")
	writeJSON(w.ResponseWriter, code, (&apiError{Status: code, Type: "invalid_request_error", Message: msg}).body())
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusNotFound)
	}
	return len(p), nil // the mux's own text is replaced by the error body
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID          string `json:"id"`
		Object      string `json:"object"`
		Created     int64  `json:"created"`
		OwnedBy     string `json:"owned_by"`
		MaxModelLen int    `json:"max_model_len"`
	}
	writeJSON(w, http.StatusOK, struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{s.b.ModelID(), "model", s.created, "gptlab", s.b.ContextWindow()}}})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, shuttingDown(), s.cfg.RetryAfter)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func shuttingDown() *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
		Message: "the server is shutting down and takes no new requests"}
}

// readBody reads a body of at most the limit: 413 past it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: "the request body is over this server's limit of " + strconv.FormatInt(s.cfg.MaxBodyBytes, 10) + " bytes"}
	case err != nil:
		return nil, badRequest("", "invalid_body", "reading the request body: %v", err)
	}
	return body, nil
}

// shutdownGrace is how long Shutdown waits, after cancelling the requests
// still running, for their connections to close.
const shutdownGrace = 10 * time.Second

// Serve accepts connections on l until Shutdown; it then returns
// http.ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.http == nil {
		s.http = &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
			BaseContext: func(net.Listener) context.Context { return s.base }}
	}
	hs := s.http
	s.mu.Unlock()
	return hs.Serve(l)
}

// Shutdown stops taking requests (the listener closes; a request on a
// connection still open gets 503), lets the requests in flight finish for
// up to drain, then cancels those still running (the backend frees what
// they hold; a stream ends with an error event) and waits for them to
// end. It returns how many were cancelled.
func (s *Server) Shutdown(drain time.Duration) (cancelled int, err error) {
	s.mu.Lock()
	s.draining.Store(true)
	hs := s.http
	s.mu.Unlock()
	done := make(chan error, 1)
	if hs != nil {
		go func() { // closes the listener; ends when every connection is idle
			ctx, cancel := context.WithTimeout(context.Background(), drain+shutdownGrace)
			defer cancel()
			if err := hs.Shutdown(ctx); err != nil {
				hs.Close()
				done <- err
				return
			}
			done <- nil
		}()
	} else {
		done <- nil
	}
	finished := make(chan struct{})
	go func() { s.inflight.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(drain):
		cancelled = int(s.active.Load())
		s.abortAll()
		<-finished
	}
	return cancelled, <-done
}

// enter admits a generation request unless the server is draining; the
// caller calls the returned leave when it is done.
func (s *Server) enter() (leave func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return nil, false
	}
	s.inflight.Add(1)
	s.active.Add(1)
	return func() { s.active.Add(-1); s.inflight.Done() }, true
}
