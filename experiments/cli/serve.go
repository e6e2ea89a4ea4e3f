package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"gptlab/engine"
	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/reports"
	"gptlab/serving/openai"
)

func init() {
	RegisterCommand(&Command{
		Name:  "serve",
		Usage: "--model CKPT [--addr ADDR] [--set key=value ...]",
		Short: "serve a checkpoint over OpenAI's HTTP API from the paged-KV engine",
		Long: "POST /v1/completions and /v1/chat/completions (streaming as server-sent events), GET /v1/models, " +
			"/health and /metrics (Prometheus, vLLM's names), from the paged-KV engine with continuous batching. " +
			"A request past the engine's waiting limit gets 429 with Retry-After. Ctrl-C or SIGTERM stops accepting, " +
			"lets the requests in flight finish for the drain time, cancels the rest, and exits 130 with one line. " +
			"docs/serve.md has curl examples.",
		Setup: serveCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&serveDefaults, nil).WriteText(w, reports.Width)
		},
	})
}

// serveConfig are the settings of `gptlab serve`: the engine's and the
// HTTP server's.
type serveConfig struct {
	Name       string        `set:"name" help:"the model id clients send and /v1/models lists; empty: gptlab-PRESET (gptlab-gpt for another shape)"`
	BlockSize  int           `set:"block-size" help:"tokens per KV block"`
	Blocks     int           `set:"blocks" help:"KV blocks in the pool"`
	HostBlocks int           `set:"host-blocks" help:"host blocks for swapped-out sequences (0: recompute preemption only)"`
	Caching    bool          `set:"caching" help:"automatic prefix caching"`
	Policy     string        `set:"policy" help:"continuous (iteration-level batching) or fixed (static batches)"`
	MaxSeqs    int           `set:"max-seqs" help:"sequences running at once"`
	MaxTokens  int           `set:"max-tokens" help:"tokens per iteration (continuous)"`
	Chunked    bool          `set:"chunked" help:"chunked prefill (continuous)"`
	MaxWaiting int           `set:"max-waiting" help:"requests waiting for admission; past it new requests get 429"`
	Drain      time.Duration `set:"drain" help:"how long Ctrl-C or SIGTERM lets the requests in flight finish before cancelling them"`
	MaxBody    int64         `set:"max-body" help:"largest request body in bytes (413 past it)"`
	RetryAfter time.Duration `set:"retry-after" help:"what a 429 tells the client to wait"`
}

var serveDefaults = serveConfig{BlockSize: engine.DefaultConfig.BlockSize, Blocks: engine.DefaultConfig.Blocks,
	Caching: engine.DefaultConfig.Caching, Policy: engine.DefaultConfig.Policy, MaxSeqs: engine.DefaultConfig.MaxSeqs,
	MaxTokens: engine.DefaultConfig.MaxTokens, Chunked: engine.DefaultConfig.Chunked, MaxWaiting: engine.DefaultMaxWaiting,
	Drain: 3 * time.Second, MaxBody: openai.DefaultMaxBodyBytes, RetryAfter: time.Second}

// maxDrain keeps the drain inside the command line's interrupt grace, so
// that serve always gets to say how it stopped.
const maxDrain = interruptGrace - time.Second

func serveCommand(fs *flag.FlagSet) Runner {
	model := fs.String("model", "", "training checkpoint `CKPT`: model.safetensors of gpt train --out")
	addr := fs.String("addr", "127.0.0.1:8000", "address `ADDR` to listen on, HOST:PORT (port 0: any free port, printed at start)")
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value` override of a setting (repeatable; listed below)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("serve", args); err != nil {
			return err
		}
		sc := serveDefaults
		if err := lab.ApplySets(&sc, sets); err != nil {
			return err
		}
		switch {
		case *model == "":
			return lab.Usagef("serve: --model is required (a checkpoint of gpt train --out)")
		case sc.Drain < 0 || sc.Drain > maxDrain:
			return lab.Usagef("--set drain=%v: want 0 to %v (the interrupt grace is %v)", sc.Drain, maxDrain, interruptGrace)
		case sc.MaxBody < 1024 || sc.MaxBody > 1<<30:
			return lab.Usagef("--set max-body=%d: want 1024 to %d bytes", sc.MaxBody, 1<<30)
		case sc.RetryAfter < time.Second || sc.RetryAfter > time.Hour:
			return lab.Usagef("--set retry-after=%v: want 1s to 1h", sc.RetryAfter)
		case sc.MaxWaiting < 1:
			return lab.Usagef("--set max-waiting=%d: want at least 1", sc.MaxWaiting)
		}
		ck, err := models.LoadCheckpoint(*model)
		if err != nil {
			return lab.Usagef("serve: --model: %v", err)
		}
		e, err := engine.New(ck.Params, engine.Config{BlockSize: sc.BlockSize, Blocks: sc.Blocks, HostBlocks: sc.HostBlocks,
			Caching: sc.Caching, Policy: sc.Policy, MaxSeqs: sc.MaxSeqs, MaxTokens: sc.MaxTokens, Chunked: sc.Chunked,
			Swap: sc.HostBlocks > 0, Watermark: engine.DefaultConfig.Watermark, MaxWaiting: sc.MaxWaiting})
		if err != nil {
			return lab.Usagef("serve: --set: %v", err)
		}
		l, err := net.Listen("tcp", *addr)
		if err != nil {
			return lab.Usagef("serve: --addr %s: %v", *addr, err)
		}
		name := sc.Name
		if name == "" {
			name = "gptlab-" + presetOf(ck.Params.Config())
		}
		return serveEngine(ctx, e, engine.NewBackend(e, ck.Tokenizer(), name), l, &sc, stderr)
	}
}

// serveEngine runs the engine's loop and the HTTP server until ctx ends,
// then drains both.
func serveEngine(ctx context.Context, e *engine.Engine, b *engine.Backend, l net.Listener, sc *serveConfig, stderr io.Writer) error {
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	ran := make(chan error, 1)
	go func() { ran <- e.Run(runCtx) }()
	srv := openai.New(b, openai.Config{MaxBodyBytes: sc.MaxBody, RetryAfter: sc.RetryAfter})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	fmt.Fprintf(stderr, "gptlab serve: %s (context window %d tokens, vocabulary %d) on http://%s/v1; Ctrl-C stops (drain %v)\n",
		b.ModelID(), b.ContextWindow(), b.Vocab(), l.Addr(), sc.Drain)
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("serve: the HTTP server stopped: %w", err)
	case err := <-ran:
		srv.Shutdown(0)
		return fmt.Errorf("serve: the engine stopped: %w", err)
	}
	cancelled, err := srv.Shutdown(sc.Drain)
	e.Close() // nothing is in flight now; Run returns
	select {
	case <-ran:
	case <-time.After(time.Second):
		stopRun()
		<-ran
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: shutting down: %w", err)
	}
	if cancelled > 0 {
		return lab.Interruptedf("serve: stopped; %d requests still running after the drain of %v were cancelled", cancelled, sc.Drain)
	}
	return lab.Interruptedf("serve: stopped; every request in flight finished within the drain of %v", sc.Drain)
}

// presetOf names the preset whose shape c has, or "gpt".
func presetOf(c models.Config) string {
	for _, name := range models.PresetNames() {
		p, _ := models.Preset(name)
		if p.Block == c.Block && p.Layers == c.Layers && p.Heads == c.Heads && p.Embd == c.Embd {
			return name
		}
	}
	return "gpt"
}
