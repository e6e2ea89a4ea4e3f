package servingengine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"gptlab/engine"
	"gptlab/models"
	"gptlab/reports"
	"gptlab/serving"
	"gptlab/serving/loadgen"
	"gptlab/serving/openai"
)

// httpDrain bounds the loopback server's shutdown: every request has
// completed by then (loadgen waits for its responses).
const httpDrain = 2 * time.Second

// httpCost serves the same requests in process (engine.Replay: the lab's
// own driver) and through gptlab serve's handler on a loopback port
// (serving/openai over the engine's Run loop, serving/loadgen as the
// client, streaming), the two interleaved, and reports both: the
// difference is what HTTP costs (JSON, server-sent events, the sockets,
// the goroutines between the engine's loop and each connection).
func (el *engineLab) httpCost(ctx context.Context, r *reports.Report, rate float64, reqs []serving.Request) error {
	cfg := el.cfg
	contCfg := el.continuousConfig()
	contCfg.MaxWaiting = len(reqs) // no 429: every request is served
	var local, remote []serving.Summary
	failed, completed := 0, 0
	for rep := range cfg.LatencyReps {
		res, err := el.replay(ctx, reqs, contCfg, rate)
		if err != nil {
			return err
		}
		local = append(local, res.Rec.Summary(serving.SLO{}))
		hr, err := el.serveHTTP(ctx, contCfg, reqs, uint64(el.opt.Seed)+uint64(rep))
		if err != nil {
			return err
		}
		s := hr.Summary(serving.SLO{})
		remote = append(remote, s)
		completed += s.Completed
		failed += len(hr.Failures())
	}
	l, h := medianSummary(local), medianSummary(remote)
	ms := func(s float64) float64 { return 1e3 * s }
	t := r.AddTable(fmt.Sprintf("In process against HTTP on loopback: %d requests at %.0f req/s (the latency section's middle rate)", len(reqs), rate),
		reports.Text("driver"), reports.Float("TTFT p50 ms", 3), reports.Float("p90", 3), reports.Float("TPOT p50 ms", 3),
		reports.Float("p90", 3), reports.Float("E2E p50 ms", 3), reports.Float("p90", 3), reports.Float("out tok/s", 0))
	for _, row := range []struct {
		name string
		s    serving.Summary
	}{{"in process (engine.Replay)", l}, {"HTTP (gptlab serve, bench serve)", h}} {
		s := row.s
		t.Row(row.name, ms(s.TTFT.Median), ms(s.TTFT.P90), ms(s.TPOT.Median), ms(s.TPOT.P90), ms(s.E2E.Median), ms(s.E2E.P90), s.OutputThroughput)
	}
	t.Row("HTTP's cost", ms(h.TTFT.Median-l.TTFT.Median), ms(h.TTFT.P90-l.TTFT.P90), ms(h.TPOT.Median-l.TPOT.Median),
		ms(h.TPOT.P90-l.TPOT.P90), ms(h.E2E.Median-l.E2E.Median), ms(h.E2E.P90-l.E2E.P90), h.OutputThroughput-l.OutputThroughput)
	t.Note("Each the median of %d runs of the same requests, in process and over HTTP alternately. Over HTTP the engine runs its own loop (engine.Run) and serving/openai's handler on 127.0.0.1, and serving/loadgen (what `gptlab bench serve` runs) streams every request with prompts as token ids; its times start when a request is sent. In process, engine.Replay steps the engine itself and times from each arrival.", cfg.LatencyReps)
	r.Metric("http_ttft_p50_cost_ms", ms(h.TTFT.Median-l.TTFT.Median))
	r.Metric("http_tpot_p50_cost_ms", ms(h.TPOT.Median-l.TPOT.Median))
	r.Metric("http_e2e_p50_cost_ms", ms(h.E2E.Median-l.E2E.Median))
	want := cfg.LatencyReps * len(reqs)
	r.Check("every request over HTTP completes", completed == want && failed == 0,
		"%d of %d completed over loopback (%d causes of failure)", completed, want, failed)
	return nil
}

// serveHTTP starts an engine with c under openai's server on a loopback
// port, sends reqs through loadgen and stops both.
func (el *engineLab) serveHTTP(ctx context.Context, c engine.Config, reqs []serving.Request, seed uint64) (*loadgen.Result, error) {
	e, err := el.engine(c)
	if err != nil {
		return nil, err
	}
	tok, err := el.tokenizer()
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()
	id := "gptlab-" + el.cfg.Model
	srv := openai.New(engine.NewBackend(e, tok, id), openai.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		<-ran
		return nil, fmt.Errorf("serve on loopback: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	res, runErr := loadgen.Run(ctx, loadgen.Config{URL: "http://" + ln.Addr().String(), Model: id, Requests: reqs,
		Tokens: true, Vocab: el.mcfg.Vocab, Seed: seed, Timeout: time.Minute})
	_, shutErr := srv.Shutdown(httpDrain)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		shutErr = errors.Join(shutErr, err)
	}
	e.Close()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		shutErr = errors.Join(shutErr, err)
	}
	el.finish(e, "HTTP on loopback")
	if runErr != nil {
		return nil, runErr
	}
	if shutErr != nil {
		return nil, fmt.Errorf("stop the loopback server: %w", shutErr)
	}
	return res, nil
}

// tokenizer is a character tokenizer of the model's vocabulary (the
// random-weight model has no corpus): token i is the character ' '+i.
func (el *engineLab) tokenizer() (*models.Tokenizer, error) {
	var chars strings.Builder
	for i := range el.mcfg.Vocab {
		chars.WriteRune(rune(' ' + i))
	}
	return models.TokenizerFromChars(chars.String())
}
