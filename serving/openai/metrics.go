package openai

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The histograms' buckets are vLLM's (vllm/v1/metrics/loggers.py), so a
// dashboard built for vLLM reads these the same way.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// metrics are the server's Prometheus metrics, in a registry of its own,
// named as vLLM names them where vLLM has the metric, each with the
// model_name label vLLM gives it.
type metrics struct {
	reg        *prometheus.Registry
	ttft       prometheus.Observer
	tpot       prometheus.Observer // every gap between consecutive tokens of a request, as vLLM's
	e2e        prometheus.Observer
	prompt     prometheus.Counter
	generation prometheus.Counter
	success    *prometheus.CounterVec // by finished_reason: stop, length, abort
	http       *prometheus.CounterVec // by handler and status code
}

func newMetrics(b Backend) *metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": b.ModelID()}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	gauge := func(name, help string, f func(Stats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(b.Stats()) }))
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", func(s Stats) float64 { return float64(s.Running) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", func(s Stats) float64 { return float64(s.Waiting) })
	gauge("vllm:gpu_cache_usage_perc", "KV-cache usage: the fraction of the KV block pool in use. 1 means 100 percent usage.",
		func(s Stats) float64 { return s.KVUsage })
	m := &metrics{
		reg:        reg,
		ttft:       hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		tpot:       hist("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", tpotBuckets),
		e2e:        hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", e2eBuckets),
		prompt:     counter("vllm:prompt_tokens_total", "Number of prefill tokens processed."),
		generation: counter("vllm:generation_tokens_total", "Number of generation tokens processed."),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
			Help: "Count of processed requests by finish reason (abort: cancelled by the client or the shutdown).", ConstLabels: labels},
			[]string{"finished_reason"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "http_requests_total",
			Help: "HTTP requests by handler and status code."}, []string{"handler", "status"}),
	}
	for _, r := range []string{string(FinishStop), string(FinishLength), "abort"} {
		m.success.WithLabelValues(r) // present at 0, as vLLM's
	}
	reg.MustRegister(m.success, m.http)
	return m
}

// handler serves the registry in Prometheus' text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// choiceTimes records one backend request's latencies as it runs.
type choiceTimes struct {
	start, last time.Time
	tokens      int
}

// token records a token's arrival.
func (c *choiceTimes) token(m *metrics, now time.Time) {
	if c.tokens == 0 {
		m.ttft.Observe(now.Sub(c.start).Seconds())
	} else {
		m.tpot.Observe(now.Sub(c.last).Seconds())
	}
	c.last = now
	c.tokens++
	m.generation.Inc()
}

// end records how the request ended.
func (c *choiceTimes) end(m *metrics, reason string, now time.Time) {
	m.success.WithLabelValues(reason).Inc()
	if reason != "abort" {
		m.e2e.Observe(now.Sub(c.start).Seconds())
	}
}

func (m *metrics) status(handler string, code int) {
	m.http.WithLabelValues(handler, strconv.Itoa(code)).Inc()
}
