// Package experiments owns the lab registry, the per-lab configuration
// (defaults in a struct, overridden with --set key=value), the command line
// of gptlab, and the exit gate. Each lab lives in a file of its own and
// registers itself from init; the numerical work is in the other packages.
package experiments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"gptlab/reports"
)

// Options are the settings every lab shares.
type Options struct {
	Seed  int64     // --seed: every random choice of the run derives from it
	Quick bool      // --quick: shrink the lab to well under a minute on 2 cores
	Log   io.Writer // progress for a person; io.Discard under --format json
	Out   string    // --out DIR, or ""; labs that make large side files may use it
}

// Lab is one experiment a user runs by name.
type Lab struct {
	Name  string
	Short string
	// Built is false for a lab that is named in the design but not built
	// yet: running it says so and exits 2, it is never faked.
	Built bool
	// config returns a fresh pointer to the lab's config struct, holding
	// the defaults; fields carry `set:"key"` and `help:"..."` tags.
	config func() any
	run    func(ctx context.Context, cfg any, opt Options) (*reports.Report, error)
}

// ErrNotBuilt is returned when a lab is named but not built yet.
var ErrNotBuilt = errors.New("not built yet")

var registry = map[string]*Lab{}

// Register adds a built lab. defaults is the config struct (not a pointer)
// whose fields hold the default values.
func Register[C any](name, short string, defaults C, run func(ctx context.Context, cfg *C, opt Options) (*reports.Report, error)) {
	if _, dup := registry[name]; dup && registry[name].Built {
		panic("experiments: lab registered twice: " + name)
	}
	registry[name] = &Lab{
		Name:   name,
		Short:  short,
		Built:  true,
		config: func() any { c := defaults; return &c },
		run: func(ctx context.Context, cfg any, opt Options) (*reports.Report, error) {
			return run(ctx, cfg.(*C), opt)
		},
	}
}

// planned names the labs of the design, so `gptlab list` shows all of them
// and running one that is not built says so plainly.
var planned = []struct{ name, short string }{
	{"gpt", "the small GPT: train, loss curve against the entropy rate, sample"},
	{"reuse", "buffer liveness and reuse: planners, lower bound, verified by simulation"},
	{"arena", "the GPT's graph run from one planned arena: lifetimes, peak, speed"},
	{"checkpoint", "gradient checkpointing: recompute with reproducible dropout, memory vs work"},
	{"precision", "mixed precision: fp16/bf16 storage, f32 accumulation, dynamic loss scaling"},
	{"quantize", "int8 per-channel weight quantization: quality, memory, latency"},
	{"data-parallel", "two OS processes, all-reduce of gradients, equal to the full batch"},
	{"tensor-parallel", "column/row-split linear layers across two processes"},
	{"serving", "paged-KV serving simulator: fixed vs continuous batching"},
	{"serving-engine", "one serving policy on the real model"},
}

func init() {
	for _, p := range planned {
		if _, ok := registry[p.name]; !ok {
			registry[p.name] = &Lab{Name: p.name, Short: p.short}
		}
	}
}

// Labs returns every lab in the design's order, built or not.
func Labs() []*Lab {
	order := map[string]int{}
	for i, p := range planned {
		order[p.name] = i
	}
	out := make([]*Lab, 0, len(registry))
	for _, l := range registry {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := order[out[i].Name]
		oj, jok := order[out[j].Name]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Find returns the lab with that name.
func Find(name string) (*Lab, error) {
	l, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown lab %q (gptlab list shows them)", name)
	}
	return l, nil
}

// ErrUsage marks bad usage or bad input: the command prints the message on
// one line and exits with status 2.
var ErrUsage = errors.New("bad usage")

// usageError makes a bad-input error (exit status 2) whose text is the
// message alone; errors.Is(err, ErrUsage) holds for it.
func usageError(format string, args ...any) error {
	return &badInput{msg: fmt.Sprintf(format, args...)}
}

type badInput struct{ msg string }

func (e *badInput) Error() string        { return e.msg }
func (e *badInput) Is(target error) bool { return target == ErrUsage }

// ratio is a/b for a report, NaN (null in JSON) when b is 0.
func ratio(a, b int64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}
