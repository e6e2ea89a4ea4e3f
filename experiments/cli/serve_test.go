package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gptlab/parallel"
	"gptlab/reports"
)

var (
	tinyCkptOnce sync.Once
	tinyCkpt     string
	tinyCkptErr  string
)

// tinyCheckpoint trains the tiny preset for a few steps on Shakespeare's
// characters when ../shared has them (the chat template's ':' and newline
// are in that vocabulary), else on the embedded corpus, once per test run.
func tinyCheckpoint(t *testing.T) string {
	t.Helper()
	tinyCkptOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gptlab-serve-test-")
		if err != nil {
			tinyCkptErr = err.Error()
			return
		}
		args := []string{"gpt", "train", "--set", "config=tiny", "--set", "iters=4", "--set", "warmup=1",
			"--set", "eval-batches=1", "--set", "sample-chars=0", "--format", "json", "--out", dir}
		if data := "../../../shared/data/tinyshakespeare.txt"; fileExists(data) {
			args = append(args, "--set", "data="+data)
		}
		if code, _, errs := runMain(args...); code > 1 {
			tinyCkptErr = errs
			return
		}
		tinyCkpt = filepath.Join(dir, "model.safetensors")
	})
	if tinyCkpt == "" {
		t.Fatalf("training a tiny checkpoint: %s", tinyCkptErr)
	}
	return tinyCkpt
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// startServe starts the test binary as gptlab serve on a free loopback
// port and returns its base URL, the process and the rest of its stderr.
func startServe(t *testing.T, args ...string) (string, *exec.Cmd, <-chan []string) {
	t.Helper()
	cmd, err := parallel.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "GPTLAB_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // never wait forever
	t.Cleanup(func() { timer.Stop(); cmd.Process.Kill() })
	sc := bufio.NewScanner(stderr)
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/v1`)
	var url string
	for url == "" && sc.Scan() {
		if m := addr.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		cmd.Wait()
		t.Fatalf("gptlab serve printed no address (exit %d)", cmd.ProcessState.ExitCode())
	}
	rest := make(chan []string, 1)
	go func() {
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		rest <- lines
	}()
	return url, cmd, rest
}

// TestServeEndToEnd: gptlab serve on a trained checkpoint answers a greedy
// completion with the very text gpt sample --temperature 0 writes, streams
// it, serves /v1/models and /metrics, carries bench serve's load with
// every request completed, and on SIGTERM exits 130 with one line.
func TestServeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny checkpoint and runs gptlab serve")
	}
	ckpt := tinyCheckpoint(t)
	url, cmd, rest := startServe(t, "--model", ckpt, "--set", "blocks=64", "--set", "block-size=4")
	const prompt, n = "the ", 10
	code, out, errs := runMain("gpt", "sample", "--model", ckpt, "--prompt", prompt, "--tokens", "10", "--temperature", "0")
	if code != 0 {
		t.Fatalf("gpt sample: %d %s", code, errs)
	}
	want := strings.TrimSuffix(out, "\n")[len(prompt):]
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"gptlab-tiny","prompt":"the ","max_tokens":10,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct{ PromptTokens, CompletionTokens int } `json:"usage"`
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("completion %s: %v", body, err)
	}
	if c.Choices[0].Text != want || c.Choices[0].FinishReason != "length" {
		t.Errorf("greedy completion %q (%s), want gpt sample's %q (length)", c.Choices[0].Text, c.Choices[0].FinishReason, want)
	}
	resp, err = http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"the ","max_tokens":10,"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	streamedText := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var ch struct{ Choices []struct{ Text string } }
		json.Unmarshal([]byte(d), &ch)
		streamedText += ch.Choices[0].Text
	}
	resp.Body.Close()
	if streamedText != want {
		t.Errorf("streamed %q, want %q", streamedText, want)
	}
	code, out, errs = runMain("bench", "serve", "--url", url, "--set", "requests=24", "--set", "rate=inf",
		"--set", "prompt=uniform:1:6", "--set", "output=fixed:8", "--set", "alphabet=abcde", "--format", "json")
	if code != 0 {
		t.Errorf("bench serve: %d %s", code, errs)
	} else if m := jsonMetrics(t, out); m["completed_requests"] != 24.0 || m["output_tokens"] != 24.0*8 {
		t.Errorf("bench serve: %v completed, %v tokens; want 24 and 192", m["completed_requests"], m["output_tokens"])
	}
	outDir := t.TempDir()
	code, out, errs = runMain("bench", "serve", "--url", url, "--set", "requests=8", "--set", "rate=200",
		"--set", "prompt=fixed:3", "--set", "output=fixed:6", "--set", "alphabet=abc", "--out", outDir)
	if code != 0 {
		t.Errorf("bench serve --out: %d %s", code, errs)
	}
	for _, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > reports.Width {
			t.Errorf("bench serve's text has a line of %d columns: %q", n, l)
		}
	}
	for _, f := range []string{"report.md", "report.json", "bench-serve-latency.svg", "bench-serve-timeline.png"} {
		if !fileExists(filepath.Join(outDir, f)) {
			t.Errorf("bench serve --out wrote no %s", f)
		}
	}
	mresp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, s := range []string{`vllm:request_success_total{finished_reason="length",model_name="gptlab-tiny"} 34`,
		`vllm:generation_tokens_total{model_name="gptlab-tiny"} 260`, `vllm:gpu_cache_usage_perc{model_name="gptlab-tiny"} 0`} {
		if !strings.Contains(string(metrics), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	lines := <-rest
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || len(lines) != 1 || !strings.Contains(lines[0], "every request in flight finished") {
		t.Errorf("after SIGTERM: exit %d, stderr %q; want 130 and one line", code, lines)
	}
}

func TestServeBadInput(t *testing.T) {
	dir := t.TempDir()
	notCkpt := filepath.Join(dir, "x.safetensors")
	os.WriteFile(notCkpt, []byte("not a checkpoint"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{"serve"}, "--model is required"},
		{"not a checkpoint", []string{"serve", "--model", notCkpt}, notCkpt},
		{"drain past the grace", []string{"serve", "--model", notCkpt, "--set", "drain=10s"}, "drain=10s"},
		{"unknown setting", []string{"serve", "--model", notCkpt, "--set", "rate=3"}, `unknown key "rate"`},
		{"bench: no url", []string{"bench", "serve"}, "--url is required"},
		{"bench: not a url", []string{"bench", "serve", "--url", "localhost:8000"}, `--url "localhost:8000"`},
		{"bench: rate 0", []string{"bench", "serve", "--url", "http://127.0.0.1:1", "--set", "rate=0"}, "rate=0"},
		{"bench: bad lengths", []string{"bench", "serve", "--url", "http://127.0.0.1:1", "--set", "prompt=fixed:0"}, "prompt=fixed:0"},
		{"bench: no trace", []string{"bench", "serve", "--url", "http://127.0.0.1:1", "--set", "trace=" + filepath.Join(dir, "none.csv")}, "none.csv"},
		{"bench: bad trace", []string{"bench", "serve", "--url", "http://127.0.0.1:1", "--set", "trace=" + notCkpt}, "line 1"},
		{"bench: prompts", []string{"bench", "serve", "--url", "http://127.0.0.1:1", "--set", "prompts=ids"}, "prompts=ids"},
		{"bench: no server", []string{"bench", "serve", "--url", "http://127.0.0.1:1"}, "http://127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runMain(tc.args...)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != 2 || len(lines) != 1 || !strings.Contains(errs, tc.want) {
				t.Errorf("gptlab %q: exit %d, stderr %q; want 2 and one line naming %q", tc.args, code, errs, tc.want)
			}
		})
	}
	if code, _, errs := runMain("serve", "--model", tinyCheckpoint(t), "--addr", "256.0.0.1:80"); code != 2 || !strings.Contains(errs, "--addr 256.0.0.1:80") {
		t.Errorf("serve --addr 256.0.0.1:80: exit %d, %q; want 2 naming --addr", code, errs)
	}
}
