// Package servingengine is the serving-engine lab: the paged-KV engine
// (package engine) serving a GPT under serving's own schedulers and block
// manager, measured as serving people measure it: output tokens/s against
// batch size and context, prefill tokens/s against chunk size, TTFT, TPOT,
// ITL and E2E against arrival rate on the wall clock, PyTorch's KV-cached
// eager decoding beside it, serving's simulator calibrated on the engine,
// and fixed against continuous batching on the engine. Its checks are the
// engine's correctness (greedy equality with decoding alone, preemption
// equality, blocks free after load, invariants) and the targets.
package servingengine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"gptlab/engine"
	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/reports"
	"gptlab/serving"
)

type engineConfig struct {
	Model         string        `set:"model" help:"GPT preset served (random weights from --seed: throughput does not depend on them)"`
	Weights       string        `set:"weights" help:"the engine's linear layers: f32, or int8 (per output channel, activations quantized per row as PyTorch's quantize_dynamic); int8 also measures f32 decode beside it"`
	Batches       []int         `set:"batches" help:"decode batch sizes"`
	Torch         []int         `set:"torch" help:"batch sizes PyTorch runs at too"`
	Prompt        int           `set:"prompt" help:"decode sweep: prompt tokens per sequence"`
	Tokens        int           `set:"tokens" help:"decode sweep: tokens generated per sequence"`
	Contexts      []int         `set:"contexts" help:"context lengths of the context sweep (batch 8)"`
	Chunks        []int         `set:"chunks" help:"prefill chunk sizes (tokens per iteration)"`
	Repeats       int           `set:"repeats" help:"timed repetitions of each throughput point (best kept)"`
	Requests      int           `set:"requests" help:"requests per latency run"`
	Loads         []float64     `set:"loads" help:"arrival rates as fractions of the engine's measured capacity"`
	LatencyReps   int           `set:"latency-repeats" help:"runs of each latency rate (the median kept)"`
	PromptLens    string        `set:"prompt-lens" help:"latency runs' prompt lengths (serving's forms)"`
	OutputLens    string        `set:"output-lens" help:"latency runs' output lengths"`
	BlockSize     int           `set:"block-size" help:"tokens per KV block"`
	Blocks        int           `set:"blocks" help:"device blocks in the KV pool"`
	MaxSeqs       int           `set:"max-seqs" help:"continuous: sequences running at once; fixed: the batch"`
	MaxTokens     int           `set:"max-tokens" help:"continuous: tokens per iteration (chunked prefill)"`
	GoodputPrompt string        `set:"goodput-prompt" help:"goodput runs' prompt lengths"`
	GoodputOutput string        `set:"goodput-output" help:"goodput runs' output lengths (widely varying: a fixed batch waits for its longest)"`
	GoodputLoads  []float64     `set:"goodput-loads" help:"goodput runs' rates as fractions of that workload's capacity"`
	GoodputCV     float64       `set:"goodput-cv" help:"goodput runs' arrival burstiness (CV of the gaps; 1: Poisson)"`
	GoodputReqs   int           `set:"goodput-requests" help:"requests per goodput run"`
	GoodputBudget time.Duration `set:"goodput-budget" help:"time the goodput check may spend on rounds past its first ten, while inconclusive"`
	SLOTTFT       time.Duration `set:"slo-ttft" help:"goodput's TTFT limit (0: 10 batch-1 decode iterations, see the report)"`
	SLOTPOT       time.Duration `set:"slo-tpot" help:"goodput's TPOT limit (0: 3 batch-32 decode iterations)"`
	Threads       int           `set:"threads" help:"PyTorch's threads (the engine runs on one)"`
	TorchRounds   int           `set:"torch-rounds" help:"rounds of the checks against PyTorch (batches 1 and 32): each a torch_infer.py run beside a decode run of ours"`
}

var engineDefaults = engineConfig{
	Model: "baby", Weights: "f32", Batches: []int{1, 8, 32, 64}, Torch: []int{1, 8, 32, 64}, Prompt: 1, Tokens: 63, Contexts: []int{8, 16, 32, 56},
	Chunks: []int{8, 16, 32, 64}, Repeats: 3, Requests: 300, Loads: []float64{0.2, 0.35, 0.5, 0.65, 0.8}, LatencyReps: 3,
	PromptLens: "uniform:4:32", OutputLens: "uniform:4:32", GoodputPrompt: "uniform:2:8", GoodputOutput: "uniform:1:56",
	GoodputLoads: []float64{0.2, 0.3, 0.4, 0.5, 0.6}, GoodputCV: 2, GoodputReqs: 400, GoodputBudget: 20 * time.Second, BlockSize: 16, Blocks: 1024, MaxSeqs: 32,
	MaxTokens: 64, Threads: 1, TorchRounds: 6,
}

// Lab is the serving-engine lab.
var Lab = lab.New("serving-engine", "one serving policy on the real model", engineDefaults, engineQuick, runEngine)

// engineQuick keeps every section with fewer points and requests, and
// PyTorch at one batch size (each point starts a Python process: several
// seconds), the one whose target is the harder.
func engineQuick(c *engineConfig) {
	c.Repeats, c.Requests, c.Contexts, c.Chunks, c.Loads = 1, 100, []int{8, 48}, []int{16, 64}, []float64{0.2, 0.5, 0.8}
	c.GoodputLoads, c.GoodputReqs, c.GoodputBudget = []float64{0.25, 0.4, 0.55}, 150, 0
	c.Torch = []int{32}
}

type engineLab struct {
	cfg    *engineConfig
	opt    lab.Options
	mcfg   models.Config
	params *models.Params
	prompt serving.Lengths
	output serving.Lengths
	// the goodput runs' lengths
	gprompt, goutput serving.Lengths
	runs             int // engine runs whose blocks were checked free at the end
	leaks            []string
	checks           int64             // invariant checks after iterations
	step1            float64           // seconds of a batch-1 decode iteration (0 until measured)
	cost             serving.Cost      // the cost model fitted on the latency runs
	costErr          error             // why none could be fitted (the simulator's columns left out)
	httpRate         float64           // the latency section's middle rate and its requests,
	httpReqs         []serving.Request // served again in process and over HTTP
}

func runEngine(ctx context.Context, cfg *engineConfig, opt lab.Options) (*reports.Report, error) {
	el, err := newEngineLab(cfg, opt)
	if err != nil {
		return nil, err
	}
	r := reports.New("serving-engine", "Serving on the real model: the paged-KV engine under serving's schedulers")
	var step32, prefillTPS float64
	for _, s := range []struct {
		name string
		run  func() error
	}{
		{"correctness", func() error { return el.correctness(ctx, r) }},
		{"decode", func() (err error) { step32, err = el.decode(ctx, r); return err }},
		{"contexts", func() error { return el.contexts(ctx, r) }},
		{"prefill", func() (err error) { prefillTPS, err = el.prefill(ctx, r); return err }},
		{"latency", func() error { return el.latency(ctx, r, step32, prefillTPS) }},
		{"http", func() error { return el.httpCost(ctx, r, el.httpRate, el.httpReqs) }},
		{"goodput", func() error { return el.goodput(ctx, r, step32, prefillTPS) }},
	} {
		t0 := time.Now()
		if err := s.run(); err != nil {
			return nil, err
		}
		fmt.Fprintf(opt.Log, "serving-engine: %s took %.1f s\n", s.name, time.Since(t0).Seconds())
	}
	r.Check("blocks free after every run", len(el.leaks) == 0, "%d engine runs end with every device and host block free or cached%s", el.runs, fmtLeaks(el.leaks))
	r.Note("The model is %s with random weights from --seed (%d layers, %d heads, width %d, window %d): throughput and latency do not depend on the weights, and the correctness checks compare the engine with models' own decoding of the same weights. The engine runs on one goroutine; its linear layers and attention run on %s. The machine may be shared: timings are best-of-%d where repeated, and ratios are measured within one run.",
		cfg.Model, el.mcfg.Layers, el.mcfg.Heads, el.mcfg.Embd, el.mcfg.Block, models.PagedKernel(), cfg.Repeats)
	return r, nil
}

// maxPoolBytes bounds the KV pool a run makes: the lab makes one for each
// of its fifty or so engine runs.
const maxPoolBytes = 1 << 30

// poolBytes is at least the KV of a pool of blocks of blockSize slots for
// cfg (keys and values of every layer, in float32; the pool pads its
// panels beyond this).
func poolBytes(cfg models.Config, blockSize, blocks int) int64 {
	return int64(blockSize) * int64(blocks) * int64(cfg.Layers) * 2 * int64(cfg.Embd) * 4
}

func fmtLeaks(l []string) string {
	if len(l) == 0 {
		return ""
	}
	return "; " + fmt.Sprint(l)
}

func newEngineLab(cfg *engineConfig, opt lab.Options) (*engineLab, error) {
	mcfg, err := models.Preset(cfg.Model)
	if err != nil {
		return nil, lab.Usagef("--set model=%s: %v", cfg.Model, err)
	}
	bad := func(xs []int, lo, hi int) bool {
		return len(xs) == 0 || slices.ContainsFunc(xs, func(x int) bool { return x < lo || x > hi })
	}
	switch {
	case cfg.Weights != "f32" && cfg.Weights != "int8":
		return nil, lab.Usagef("--set weights=%s: want f32 or int8", cfg.Weights)
	case bad(cfg.Batches, 1, 256):
		return nil, lab.Usagef("--set batches=%v: want batch sizes of 1 to 256", cfg.Batches)
	case cfg.Prompt < 1 || cfg.Tokens < 2 || cfg.Prompt+cfg.Tokens > mcfg.Block:
		return nil, lab.Usagef("--set prompt=%d tokens=%d: want a prompt >= 1 and >= 2 tokens within the window of %d", cfg.Prompt, cfg.Tokens, mcfg.Block)
	case bad(cfg.Contexts, 1, mcfg.Block-5):
		return nil, lab.Usagef("--set contexts=%v: want contexts of 1 to %d (5 tokens must fit the window after it: the prefill's and 4 decodes)", cfg.Contexts, mcfg.Block-5)
	case bad(cfg.Chunks, 1, 4096):
		return nil, lab.Usagef("--set chunks=%v: want chunk sizes of 1 to 4096 tokens", cfg.Chunks)
	case cfg.Repeats < 1 || cfg.Repeats > 100:
		return nil, lab.Usagef("--set repeats=%d: want 1 to 100", cfg.Repeats)
	case cfg.TorchRounds < 1 || cfg.TorchRounds > 100:
		return nil, lab.Usagef("--set torch-rounds=%d: want 1 to 100 (6 or more for an interval)", cfg.TorchRounds)
	case cfg.Requests < 10 || cfg.Requests > 100000:
		return nil, lab.Usagef("--set requests=%d: want 10 to 100000", cfg.Requests)
	case len(cfg.Loads) < 3 || slices.ContainsFunc(cfg.Loads, func(x float64) bool { return !(x > 0 && x <= 100) }) || !slices.IsSorted(cfg.Loads):
		return nil, lab.Usagef("--set loads=%v: want three or more increasing fractions in (0, 100]", cfg.Loads)
	case len(cfg.GoodputLoads) < 2 || slices.ContainsFunc(cfg.GoodputLoads, func(x float64) bool { return !(x > 0 && x <= 100) }) || !slices.IsSorted(cfg.GoodputLoads):
		return nil, lab.Usagef("--set goodput-loads=%v: want two or more increasing fractions in (0, 100]", cfg.GoodputLoads)
	case cfg.GoodputBudget < 0 || cfg.GoodputBudget > time.Hour:
		return nil, lab.Usagef("--set goodput-budget=%v: want 0 to 1h", cfg.GoodputBudget)
	case cfg.LatencyReps < 1 || cfg.LatencyReps > 100:
		return nil, lab.Usagef("--set latency-repeats=%d: want 1 to 100", cfg.LatencyReps)
	case !(cfg.GoodputCV > 0 && cfg.GoodputCV <= 10) || cfg.GoodputReqs < 10 || cfg.GoodputReqs > 100000:
		return nil, lab.Usagef("--set goodput-cv=%v goodput-requests=%d: want a CV in (0, 10] and 10 to 100000 requests", cfg.GoodputCV, cfg.GoodputReqs)
	case cfg.BlockSize < 1 || cfg.BlockSize > 1024 || cfg.Blocks < 1 || cfg.Blocks > 1<<20:
		return nil, lab.Usagef("--set block-size=%d blocks=%d: want 1 to 1024 tokens and 1 to 1048576 blocks", cfg.BlockSize, cfg.Blocks)
	case poolBytes(mcfg, cfg.BlockSize, cfg.Blocks) > maxPoolBytes:
		return nil, lab.Usagef("--set block-size=%d blocks=%d: a pool of %d token slots takes %d MiB of KV for %s, over the lab's limit of %d MiB (each run makes its own)",
			cfg.BlockSize, cfg.Blocks, cfg.BlockSize*cfg.Blocks, poolBytes(mcfg, cfg.BlockSize, cfg.Blocks)>>20, cfg.Model, maxPoolBytes>>20)
	case cfg.MaxSeqs < 1 || cfg.MaxSeqs > 4096 || cfg.MaxTokens < 1 || cfg.MaxTokens > 1<<16:
		return nil, lab.Usagef("--set max-seqs=%d max-tokens=%d: want 1 to 4096 and 1 to 65536", cfg.MaxSeqs, cfg.MaxTokens)
	case cfg.SLOTTFT < 0 || cfg.SLOTPOT < 0:
		return nil, lab.Usagef("--set slo-ttft=%v slo-tpot=%v: want limits >= 0 (0: derived)", cfg.SLOTTFT, cfg.SLOTPOT)
	case cfg.Threads < 1 || cfg.Threads > 256:
		return nil, lab.Usagef("--set threads=%d: want 1 to 256", cfg.Threads)
	}
	el := &engineLab{cfg: cfg, opt: opt, mcfg: mcfg, params: models.NewParams(mcfg, opt.Seed)}
	if el.prompt, err = serving.ParseLengths(cfg.PromptLens); err != nil {
		return nil, lab.Usagef("--set prompt-lens=%s: %v", cfg.PromptLens, err)
	}
	if el.output, err = serving.ParseLengths(cfg.OutputLens); err != nil {
		return nil, lab.Usagef("--set output-lens=%s: %v", cfg.OutputLens, err)
	}
	if el.gprompt, err = serving.ParseLengths(cfg.GoodputPrompt); err != nil {
		return nil, lab.Usagef("--set goodput-prompt=%s: %v", cfg.GoodputPrompt, err)
	}
	if el.goutput, err = serving.ParseLengths(cfg.GoodputOutput); err != nil {
		return nil, lab.Usagef("--set goodput-output=%s: %v", cfg.GoodputOutput, err)
	}
	if el.gprompt.Hi+el.goutput.Hi > mcfg.Block {
		return nil, lab.Usagef("--set goodput-prompt=%s goodput-output=%s: the longest request, %d tokens, exceeds the window of %d", cfg.GoodputPrompt, cfg.GoodputOutput, el.gprompt.Hi+el.goutput.Hi, mcfg.Block)
	}
	if el.prompt.Hi+el.output.Hi > mcfg.Block {
		return nil, lab.Usagef("--set prompt-lens=%s output-lens=%s: the longest request, %d tokens, exceeds the window of %d", cfg.PromptLens, cfg.OutputLens, el.prompt.Hi+el.output.Hi, mcfg.Block)
	}
	// The latency and goodput runs' engines, the most demanding of the pool
	// (continuous batching keeps a watermark free).
	for _, c := range []engine.Config{el.continuousConfig(), {Policy: "fixed", MaxSeqs: cfg.MaxSeqs}} {
		if _, err := el.engine(c); err != nil {
			return nil, lab.Usagef("--set blocks=%d block-size=%d max-seqs=%d max-tokens=%d: %v", cfg.Blocks, cfg.BlockSize, cfg.MaxSeqs, cfg.MaxTokens, err)
		}
	}
	return el, nil
}

// engine makes an engine over the lab's pool with c's policy, with the
// lab's weights unless c names its own.
func (el *engineLab) engine(c engine.Config) (*engine.Engine, error) {
	if c.Weights == "" {
		c.Weights = el.cfg.Weights
	}
	c.Int8Kernel = models.Int8Dynamic
	if c.BlockSize == 0 {
		c.BlockSize = el.cfg.BlockSize
	}
	if c.Blocks == 0 {
		c.Blocks = el.cfg.Blocks
	}
	return engine.New(el.params, c)
}

// finish checks that a run left every block free and counts its checks.
func (el *engineLab) finish(e *engine.Engine, what string) {
	el.runs++
	el.checks += e.Checks()
	b := e.Scheduler().Blocks()
	if err := b.Check(nil); err != nil || b.Used() != 0 || b.HostUsed() != 0 {
		el.leaks = append(el.leaks, fmt.Sprintf("%s: %d device, %d host blocks used (%v)", what, b.Used(), b.HostUsed(), err))
	}
}

// drain steps e until idle.
func drain(ctx context.Context, e *engine.Engine) error {
	for !e.Idle() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := e.Step(); err != nil {
			return err
		}
	}
	return nil
}

// peer runs torch_infer.py decode and returns its tokens/s, or the reason
// it could not run (lab.ErrNoPeer) as an error.
func (el *engineLab) peer(ctx context.Context, batch, prompt, tokens int) (float64, error) {
	m := el.mcfg
	lines, err := lab.RunPeer(ctx, "torch_infer.py", "decode", "--batch", strconv.Itoa(batch), "--prompt", strconv.Itoa(prompt),
		"--tokens", strconv.Itoa(tokens), "--vocab", strconv.Itoa(m.Vocab), "--block", strconv.Itoa(m.Block),
		"--layers", strconv.Itoa(m.Layers), "--heads", strconv.Itoa(m.Heads), "--embd", strconv.Itoa(m.Embd),
		"--threads", strconv.Itoa(el.cfg.Threads))
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		var v struct {
			TPS float64 `json:"decode_tokens_per_s"`
		}
		if json.Unmarshal(l, &v) == nil && v.TPS > 0 {
			return v.TPS, nil
		}
	}
	return 0, fmt.Errorf("%w: torch_infer.py printed no decode_tokens_per_s", lab.ErrNoPeer)
}

// errNoPeer reports whether err means the peer is absent (not a failure).
func errNoPeer(err error) bool { return errors.Is(err, lab.ErrNoPeer) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
