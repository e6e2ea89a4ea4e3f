package openai

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// scrape returns /metrics' text.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(body)
}

// metricValue finds the sample of name whose labels are exactly labels
// (as the text format prints them) and returns its value, or -1.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func TestMetrics(t *testing.T) {
	f := newFake()
	_, ts := newTestServer(t, f)
	post(t, ts.URL, "/v1/completions", `{"prompt":"abc","max_tokens":4}`)
	post(t, ts.URL, "/v1/completions", `{"prompt":"abcd","max_tokens":9,"stop":"da"}`) // stops after 5 tokens
	post(t, ts.URL, "/v1/completions", `{"prompt":"é"}`)                               // refused
	waitFree(t, f)
	text := scrape(t, ts.URL)
	const m = `{model_name="fake-echo"}`
	for series, want := range map[string]float64{
		"vllm:prompt_tokens_total" + m:                                                7,
		"vllm:generation_tokens_total" + m:                                            9,
		`vllm:request_success_total{finished_reason="length",model_name="fake-echo"}`: 1,
		`vllm:request_success_total{finished_reason="stop",model_name="fake-echo"}`:   1,
		`vllm:request_success_total{finished_reason="abort",model_name="fake-echo"}`:  0,
		"vllm:time_to_first_token_seconds_count" + m:                                  2,
		"vllm:time_per_output_token_seconds_count" + m:                                7, // 3 + 4 gaps
		"vllm:e2e_request_latency_seconds_count" + m:                                  2,
		`vllm:e2e_request_latency_seconds_bucket{model_name="fake-echo",le="7680"}`:   2,
		`vllm:time_to_first_token_seconds_bucket{model_name="fake-echo",le="0.001"}`:  -2, // present; any count
		"vllm:num_requests_running" + m:                                               0,
		"vllm:num_requests_waiting" + m:                                               0,
		"vllm:gpu_cache_usage_perc" + m:                                               0,
		`http_requests_total{handler="/v1/completions",status="200"}`:                 2,
		`http_requests_total{handler="/v1/completions",status="400"}`:                 1,
	} {
		got := metricValue(text, series)
		if (want == -2 && got < 0) || (want != -2 && got != want) {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, help := range []string{"# TYPE vllm:time_to_first_token_seconds histogram", "# TYPE vllm:prompt_tokens_total counter",
		"# TYPE vllm:num_requests_running gauge"} {
		if !strings.Contains(text, help) {
			t.Errorf("/metrics lacks %q", help)
		}
	}
}
