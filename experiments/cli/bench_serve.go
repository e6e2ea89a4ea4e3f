package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"time"

	"gptlab/experiments/lab"
	"gptlab/reports"
	"gptlab/serving"
	"gptlab/serving/loadgen"
)

func init() {
	RegisterCommand(&Command{
		Name:  "bench serve",
		Usage: "--url URL [--set key=value ...] [--format F] [--out DIR]",
		Short: "a serving benchmark against an OpenAI-compatible endpoint, as vLLM's benchmark_serving.py",
		Long: "Replays a workload against URL's /v1/completions, streaming: the serving simulator's generator (Poisson " +
			"arrivals at rate, or all at once with rate=inf; prompt and output lengths drawn from seed) or a trace " +
			"(trace=FILE: arrival_s,prompt_tokens,output_tokens[,cancel_s]). Reports vLLM's client-side metrics " +
			"(TTFT, TPOT, ITL, E2E: mean, p50, p90, p99), request and output-token throughput and goodput at the " +
			"SLOs; a failed request is counted with its cause. One --set per key: --set rate=8 --set requests=200.",
		Setup: benchServeCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&benchServeDefaults, nil).WriteText(w, reports.Width)
		},
	})
}

// benchServeConfig are the settings of `gptlab bench serve`.
type benchServeConfig struct {
	Rate        float64       `set:"rate" help:"mean arrivals per second (Poisson); inf: every request at once"`
	CV          float64       `set:"cv" help:"coefficient of variation of the arrival gaps (1: Poisson, above: burstier)"`
	Requests    int           `set:"requests" help:"requests in the generated workload"`
	Prompt      string        `set:"prompt" help:"prompt lengths in tokens: fixed:N, uniform:LO:HI, lognormal:MEDIAN:SIGMA:CAP or zipf:S:LO:HI"`
	Output      string        `set:"output" help:"output lengths (max_tokens), same forms"`
	Trace       string        `set:"trace" help:"a CSV trace to replay instead of the generated workload"`
	Seed        uint64        `set:"seed" help:"seed of the arrivals, the lengths and the prompts' contents"`
	SLOTTFT     time.Duration `set:"slo-ttft" help:"goodput's limit on time to first token"`
	SLOTPOT     time.Duration `set:"slo-tpot" help:"goodput's limit on time per output token"`
	Concurrency int           `set:"concurrency" help:"most requests in flight (vLLM's max-concurrency); 0: unbounded"`
	Model       string        `set:"model" help:"the model name sent; empty: the first of GET /v1/models"`
	Prompts     string        `set:"prompts" help:"text (characters of alphabet: one token each on a character-level model) or tokens (ids below vocab)"`
	Alphabet    string        `set:"alphabet" help:"the characters of text prompts"`
	Vocab       int           `set:"vocab" help:"token prompts draw ids below this"`
	Temperature float64       `set:"temperature" help:"sent with every request; 0 is greedy"`
	Timeout     time.Duration `set:"timeout" help:"longest one request may take; 0: no limit"`
}

// benchServeDefaults: 200 requests at 16 per second, prompt and output
// together within a 64-token context window (the baby preset's).
var benchServeDefaults = benchServeConfig{Rate: 16, CV: 1, Requests: 200, Prompt: "uniform:4:24", Output: "uniform:8:32", Seed: 1,
	SLOTTFT: 500 * time.Millisecond, SLOTPOT: 50 * time.Millisecond, Prompts: "text", Alphabet: loadgen.DefaultAlphabet,
	Vocab: 65, Timeout: 5 * time.Minute}

func benchServeCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	target := fs.String("url", "", "base `URL` of the OpenAI-compatible server (http://127.0.0.1:8000)")
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	format, out := reportFlags(fs, "report.md, report.json and the figures")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("bench serve", args); err != nil {
			return err
		}
		if err := checkURL(*target); err != nil {
			return err
		}
		bc := benchServeDefaults
		if err := lab.ApplySets(&bc, sets); err != nil {
			return err
		}
		reqs, err := benchServeWorkload(&bc)
		if err != nil {
			return err
		}
		if err := checkReportFlags(*format, *out); err != nil {
			return err
		}
		if bc.Model == "" {
			m, err := loadgen.ServedModel(ctx, *target)
			if err != nil {
				return lab.Usagef("bench serve: --url %s: %v", *target, err)
			}
			bc.Model = m
		}
		cfg := loadgen.Config{URL: *target, Model: bc.Model, Requests: reqs, Tokens: bc.Prompts == "tokens", Vocab: bc.Vocab,
			Alphabet: bc.Alphabet, Temperature: bc.Temperature, Seed: bc.Seed, MaxConcurrency: bc.Concurrency, Timeout: bc.Timeout}
		fmt.Fprintf(logFor(*format, stderr), "bench serve: sending %d requests to %s\n", len(reqs), *target)
		res, err := loadgen.Run(ctx, cfg)
		if ctx.Err() != nil {
			return lab.Interruptedf("bench serve: interrupted; %s", nothingSaved(*out, "the report is written at the end"))
		}
		if err != nil {
			return lab.Usagef("bench serve: --url %s: %v", *target, err)
		}
		return emit(benchServeReport(*target, &bc, reqs, res), *format, *out, stdout)
	}
}

// checkURL refuses a --url that is not an http(s) URL with a host.
func checkURL(s string) error {
	if s == "" {
		return lab.Usagef("bench serve: --url is required (the server's base URL, such as http://127.0.0.1:8000)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return lab.Usagef("bench serve: --url %q: want http://HOST:PORT or https://HOST:PORT", s)
	}
	return nil
}

// benchServeWorkload checks the settings and draws (or reads) the requests.
func benchServeWorkload(bc *benchServeConfig) ([]serving.Request, error) {
	switch {
	case !(bc.Rate > 0):
		return nil, lab.Usagef("--set rate=%v: want a positive rate (requests/s) or inf", bc.Rate)
	case bc.Requests < 1 || bc.Requests > 1_000_000:
		return nil, lab.Usagef("--set requests=%d: want 1 to 1000000", bc.Requests)
	case !(bc.CV > 0 && bc.CV <= 100):
		return nil, lab.Usagef("--set cv=%v: want (0, 100]", bc.CV)
	case bc.SLOTTFT < 0 || bc.SLOTPOT < 0 || bc.Timeout < 0:
		return nil, lab.Usagef("--set slo-ttft=%v slo-tpot=%v timeout=%v: want limits ≥ 0 (0: none)", bc.SLOTTFT, bc.SLOTPOT, bc.Timeout)
	case bc.Concurrency < 0 || bc.Concurrency > 1_000_000:
		return nil, lab.Usagef("--set concurrency=%d: want 0 (unbounded) to 1000000", bc.Concurrency)
	case bc.Prompts != "text" && bc.Prompts != "tokens":
		return nil, lab.Usagef("--set prompts=%s: want text or tokens", bc.Prompts)
	case bc.Prompts == "text" && bc.Alphabet == "":
		return nil, lab.Usagef("--set alphabet=: text prompts need at least one character")
	case bc.Vocab < 1:
		return nil, lab.Usagef("--set vocab=%d: want at least 1", bc.Vocab)
	case !(bc.Temperature >= 0 && bc.Temperature <= 2):
		return nil, lab.Usagef("--set temperature=%v: want 0 to 2", bc.Temperature)
	}
	if bc.Trace != "" {
		f, err := os.Open(bc.Trace)
		if err != nil {
			return nil, lab.Usagef("--set trace=%s: %v", bc.Trace, pathCause(err))
		}
		defer f.Close()
		reqs, err := serving.ReadTrace(f)
		if err != nil {
			return nil, lab.Usagef("--set trace=%s: %v", bc.Trace, err)
		}
		return reqs, nil
	}
	prompt, err := serving.ParseLengths(bc.Prompt)
	if err != nil {
		return nil, lab.Usagef("--set prompt=%s: %v", bc.Prompt, err)
	}
	output, err := serving.ParseLengths(bc.Output)
	if err != nil {
		return nil, lab.Usagef("--set output=%s: %v", bc.Output, err)
	}
	rate := bc.Rate
	if math.IsInf(rate, 1) {
		rate = 0 // the generator's "all at once"
	}
	reqs, err := serving.Workload{N: bc.Requests, Rate: rate, CV: bc.CV, Prompt: prompt, Output: output, Seed: bc.Seed}.Generate()
	if err != nil {
		return nil, lab.Usagef("bench serve: %v", err)
	}
	return reqs, nil
}
