// Package quantize is the int8 weight quantization lab: it trains the GPT,
// quantizes its linear layers' weights to int8 (models.Quantize, the
// schemes of package precision) and sets the int8 model beside the float32
// one: quality on the validation split (perplexity, the KL divergence of
// the next-token distributions, top-1 and greedy-sample agreement, each
// matrix's SQNR, an outlier's cost to its channel), memory (the weights'
// bytes both ways, the evaluation's planned and measured peak), and
// latency (every linear layer at M=1 and M=64, the whole forward, one
// decode step from the KV cache, on both int8 kernels of internal/qgemm)
// on the trained model and on a larger one of random weights, beside
// PyTorch's dynamic int8 (../shared/peer/torch_infer.py) where torch is
// installed.
//
// It owns the measurements and the report; the quantizer is package
// precision's, the kernels internal/qgemm's, the int8 model models'.
package quantize

import (
	"context"
	"fmt"
	"time"

	"gptlab/experiments/lab"
	"gptlab/internal/par"
	"gptlab/internal/sgemm"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// quantizeConfig holds the settings of the quantize lab.
type quantizeConfig struct {
	Config      string  `set:"config" help:"model preset trained: tiny, small or baby (baby: 128 inputs a channel)"`
	Data        string  `set:"data" help:"UTF-8 text file; empty: the embedded Markov corpus"`
	Iters       int     `set:"iters" help:"training steps of the float32 model"`
	LR          float64 `set:"lr" help:"peak learning rate (warmup, then cosine decay to a tenth)"`
	EvalBatches int     `set:"eval-batches" help:"validation batches the quality is measured on"`
	Greedy      int     `set:"greedy-tokens" help:"tokens of the greedy samples compared"`
	Runs        int     `set:"runs" help:"timed runs of every latency (p50 and p95; at least 100)"`
	Threads     int     `set:"threads" help:"threads of every timed kernel, ours and PyTorch's"`
	Large       bool    `set:"large" help:"also time a larger config of random weights (its weights exceed L2)"`
	LargeEmbd   int     `set:"large-embd" help:"the larger config's embedding width"`
	LargeLayers int     `set:"large-layers" help:"the larger config's layers"`
	Torch       bool    `set:"torch" help:"run PyTorch's int8 beside ours where python3 imports torch"`
}

// quantizeDefaults: baby trained for 400 steps, the large config at embd
// 512 and 8 layers, 200 runs of every latency.
var quantizeDefaults = quantizeConfig{
	Config: "baby", Iters: 400, LR: 3e-3, EvalBatches: 8, Greedy: 200, Runs: 200, Threads: 1,
	Large: true, LargeEmbd: 512, LargeLayers: 8, Torch: true,
}

// Lab is the quantize lab.
var Lab = lab.New("quantize", "int8 per-channel weight quantization: quality, memory, latency",
	quantizeDefaults, quantizeQuick, runQuantize)

// quantizeQuick trains baby (128 inputs a channel, which the size target
// needs) for 50 steps, compares 100-token greedy samples and times baby
// alone, 100 runs each, without PyTorch (whose start alone takes seconds;
// the full lab and --set torch=true run it).
func quantizeQuick(c *quantizeConfig) {
	c.Torch = false
	c.Iters = min(c.Iters, 50)
	c.EvalBatches = min(c.EvalBatches, 3)
	c.Greedy = min(c.Greedy, 100)
	c.Runs = min(c.Runs, 100)
	c.Large = false
}

// schemes are the schemes compared, per channel (the target) first.
var schemes = []precision.Int8Scheme{precision.Int8PerChannel, precision.Int8PerTensor, precision.Int8PerBlock32}

// kernels are the int8 kernels.
var kernels = []models.Int8Kernel{models.Int8WeightOnly, models.Int8Dynamic}

func (c *quantizeConfig) validate() error {
	switch {
	case c.Iters < 1:
		return lab.Usagef("--set iters=%d: want at least 1", c.Iters)
	case c.EvalBatches < 1 || c.EvalBatches > 1000:
		return lab.Usagef("--set eval-batches=%d: want 1 to 1000", c.EvalBatches)
	case c.Greedy < 1 || c.Greedy > 10000:
		return lab.Usagef("--set greedy-tokens=%d: want 1 to 10000", c.Greedy)
	case c.Runs < 100 || c.Runs > 100000:
		return lab.Usagef("--set runs=%d: want 100 to 100000 (p95 needs a hundred runs)", c.Runs)
	case c.Threads < 1 || c.Threads > 64:
		return lab.Usagef("--set threads=%d: want 1 to 64", c.Threads)
	case c.Large && (c.LargeEmbd < 32 || c.LargeEmbd > 4096 || c.LargeEmbd%4 != 0):
		return lab.Usagef("--set large-embd=%d: want 32 to 4096, a multiple of 4 (the heads)", c.LargeEmbd)
	case c.Large && (c.LargeLayers < 1 || c.LargeLayers > 64):
		return lab.Usagef("--set large-layers=%d: want 1 to 64", c.LargeLayers)
	}
	return nil
}

// quantizeLab is what the sections share.
type quantizeLab struct {
	cfg   *quantizeConfig
	opt   lab.Options
	tc    models.TrainConfig
	data  *models.Dataset
	f32   *models.Params
	q     map[precision.Int8Scheme]*models.Quantized // the trained model's, head float32
	qHead *models.Quantized                          // per channel with the head int8
}

func runQuantize(ctx context.Context, cfg *quantizeConfig, opt lab.Options) (*reports.Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	gc := lab.Train{Config: cfg.Config, Data: cfg.Data, Iters: cfg.Iters, LR: cfg.LR, Beta2: models.DefaultBeta2,
		GradClip: 1, EvalEvery: cfg.Iters, EvalBatches: cfg.EvalBatches}
	tc, data, err := gc.Setup(opt.Seed)
	if err != nil {
		return nil, err
	}
	ql := &quantizeLab{cfg: cfg, opt: opt, tc: tc, data: data, q: map[precision.Int8Scheme]*models.Quantized{}}
	if err := ql.train(ctx); err != nil {
		return nil, err
	}
	for _, s := range schemes {
		if ql.q[s], err = models.Quantize(ql.f32, models.QuantizeOptions{Scheme: s}); err != nil {
			return nil, err
		}
	}
	if ql.qHead, err = models.Quantize(ql.f32, models.QuantizeOptions{Scheme: precision.Int8PerChannel, Head: true}); err != nil {
		return nil, err
	}
	status := lab.NewStatus(opt.Log)
	defer status.Clear()
	status.Say("quality: %d models on %d validation batches", 2*len(schemes)+2, cfg.EvalBatches)
	qual, err := ql.quality(ctx)
	if err != nil {
		return nil, err
	}
	status.Say("memory: evaluation of the float32 and int8 models")
	mem, err := ql.memory()
	if err != nil {
		return nil, err
	}
	// Every timed kernel on cfg.Threads threads, as PyTorch's.
	defer sgemm.SetThreads(sgemm.SetThreads(cfg.Threads))
	defer par.SetLimit(par.SetLimit(cfg.Threads))
	status.Say("latency: %s, %d runs each", cfg.Config, cfg.Runs)
	lat := []*latencySet{}
	small, err := ql.latency(ctx, cfg.Config, ql.f32, ql.q[precision.Int8PerChannel])
	if err != nil {
		return nil, err
	}
	lat = append(lat, small)
	if cfg.Large {
		status.Say("latency: embd %d, %d layers (random weights), %d runs each", cfg.LargeEmbd, cfg.LargeLayers, cfg.Runs)
		mc := tc.Model
		mc.Embd, mc.Layers, mc.Batch = cfg.LargeEmbd, cfg.LargeLayers, 1
		p := models.NewParams(mc, opt.Seed)
		q, err := models.Quantize(p, models.QuantizeOptions{Scheme: precision.Int8PerChannel})
		if err != nil {
			return nil, err
		}
		large, err := ql.latency(ctx, "large", p, q)
		if err != nil {
			return nil, err
		}
		lat = append(lat, large)
	}
	if cfg.Torch {
		for _, s := range lat {
			status.Say("PyTorch: %s shapes", s.name)
			s.torchRows(ctx)
		}
	}
	status.Clear()
	return ql.report(qual, mem, lat), nil
}

// train trains the float32 model.
func (ql *quantizeLab) train(ctx context.Context) error {
	tr, err := models.NewTrainer(ql.tc, ql.data)
	if err != nil {
		return err
	}
	defer tr.Close()
	bar := lab.NewProgressBar(ql.opt.Log, ql.tc.Iters)
	defer bar.Clear()
	t0 := time.Now()
	err = tr.Run(ctx, ql.tc.Iters, func(s models.StepInfo) {
		done := time.Since(t0)
		tokens := float64(s.Step * ql.tc.Model.Batch * ql.tc.Model.Block)
		bar.Step(s.Step, float64(s.Loss), tokens/done.Seconds(), done/time.Duration(s.Step)*time.Duration(ql.tc.Iters-s.Step))
	})
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	ql.f32 = tr.Params.Clone()
	return nil
}
