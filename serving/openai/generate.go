package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// piece is what a choice sends its request's handler: a text delta, and
// on its last piece the finish reason (or the error that ended it) and its
// token count.
type piece struct {
	index  int
	text   string
	finish Finish
	err    error
	last   bool
	tokens int
}

// choice is one prompt's backend request.
type choice struct {
	index     int
	ch        <-chan Token
	cancel    context.CancelFunc
	maxTokens int
	times     choiceTimes
}

// run reads the backend's stream into pieces until it ends, a stop
// string appears or max_tokens is reached; it then cancels the backend
// request and drains its stream, so the backend never blocks on it.
func (c *choice) run(s *Server, stops []string, out chan<- piece, wg *sync.WaitGroup) {
	defer wg.Done()
	defer func() {
		c.cancel()
		for range c.ch {
		}
	}()
	ts := textStream{b: s.b, stops: stops}
	n := 0
	end := func(p piece, reason string) {
		p.index, p.last, p.tokens = c.index, true, n
		c.times.end(s.m, reason, time.Now())
		out <- p
	}
	for tok := range c.ch {
		switch {
		case tok.Err != nil:
			end(piece{err: tok.Err}, "abort")
			return
		case tok.Finish != "":
			end(piece{text: ts.flush(), finish: tok.Finish}, string(tok.Finish))
			return
		}
		c.times.token(s.m, time.Now())
		n++
		delta, stopped := ts.add(tok.ID)
		switch {
		case stopped:
			end(piece{text: delta, finish: FinishStop}, string(FinishStop))
			return
		case n >= c.maxTokens:
			end(piece{text: delta + ts.flush(), finish: FinishLength}, string(FinishLength))
			return
		case delta != "":
			out <- piece{index: c.index, text: delta, tokens: n}
		}
	}
	end(piece{err: errors.New("the backend ended the stream without a finish")}, "abort")
}

type parser func(body []byte, b Backend) (*job, error)

// generate serves a completion or chat request: it validates it, starts
// one backend request per prompt (all or none: a busy backend is a 429),
// and answers as a stream or as one body.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, parse parser) {
	handler := r.URL.Path
	leave, ok := s.enter()
	if !ok {
		s.fail(w, handler, shuttingDown())
		return
	}
	defer leave()
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, handler, aerr)
		return
	}
	j, err := parse(body, s.b)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = badRequest("", "invalid_request", "%v", err)
		}
		s.fail(w, handler, ae)
		return
	}
	num := s.requests.Add(1)
	if !j.seeded {
		j.gen.Seed = num // reproducible for a given order of requests; no clock
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)() // Shutdown's cancel reaches every request
	start := time.Now()
	choices := make([]*choice, 0, len(j.prompts))
	for i, p := range j.prompts {
		req := j.gen
		req.Prompt = p
		cctx, ccancel := context.WithCancel(ctx)
		ch, err := s.b.Generate(cctx, req)
		if err != nil {
			ccancel()
			for _, c := range choices {
				c.cancel()
				for range c.ch {
				}
			}
			if errors.Is(err, ErrBusy) {
				s.fail(w, handler, &apiError{Status: http.StatusTooManyRequests, Type: "server_busy", Code: "queue_full",
					Message: fmt.Sprintf("%v; retry after %v", err, s.cfg.RetryAfter)})
				return
			}
			s.fail(w, handler, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("starting the request: %v", err)})
			return
		}
		choices = append(choices, &choice{index: i, ch: ch, cancel: ccancel, maxTokens: j.gen.MaxTokens, times: choiceTimes{start: start}})
		s.m.prompt.Add(float64(len(p)))
	}
	out := make(chan piece)
	var wg sync.WaitGroup
	for _, c := range choices {
		wg.Add(1)
		go c.run(s, j.stop, out, &wg)
	}
	go func() { wg.Wait(); close(out) }()
	defer func() { // every choice has ended before the handler returns
		cancel()
		for range out {
		}
	}()
	resp := newResponse(s, j, num)
	if j.stream {
		s.m.status(handler, http.StatusOK)
		resp.stream(w, out, cancel)
		return
	}
	code := resp.collect(w, out, cancel)
	s.m.status(handler, code)
}

// fail answers with an error and counts it.
func (s *Server) fail(w http.ResponseWriter, handler string, e *apiError) {
	s.m.status(handler, e.Status)
	writeError(w, e, s.cfg.RetryAfter)
}

// endError is the error to tell a client whose request ended with err.
func (s *Server) endError(err error) *apiError {
	if s.base.Err() != nil {
		e := shuttingDown()
		e.Message = "the server shut down before the request finished"
		return e
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: fmt.Sprintf("generation failed: %v", err)}
}
