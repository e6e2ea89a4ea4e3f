// Package experiments owns the lab registry, the per-lab configuration
// (defaults in a struct, overridden with --set key=value), the command line
// of gptlab, and the exit gate. Each lab lives in a file of its own and
// registers itself from init; the numerical work is in the other packages.
//
// Adding a lab: one file that calls Register from init with the lab's
// name, one line, its config struct of defaults (fields tagged
// `set:"key" help:"..."`), its quick function and its Run:
//
//	func init() { Register("serving", "paged-KV serving simulator", servingDefaults, servingQuick, runServing) }
//
// The registry applies quick (when --quick is given) and then the user's
// --set values, which win; Run validates the config (errors from
// usageError exit 2, one line naming the key), resolves every "0 means the
// default" setting in place to the value it used, and returns a report
// built with package reports: typed columns (reports.Bytes, Float, Ratio,
// Duration, …) so text fits 100 columns and JSON keeps exact values; no
// column that never changes (say it with Table.Constant). Run gets a
// context that Ctrl-C and SIGTERM cancel; a lab should return soon after.
// The lab is then in gptlab list, gptlab help LAB, gptlab run LAB and the
// exit gate, and in the test that renders every lab's --quick report at
// 100 columns.
//
// Adding a command: a Command value given to RegisterCommand from init,
// with its usage line, one line, and a Setup that defines its flags (each
// help text with a `METAVAR`) and returns its Runner. A subcommand is
// named "GROUP SUB" ("bench allreduce", "gpt quantize") and appears under
// its group; top-level commands are listed in the design's order
// (topCommands, where launch and serve have their places already). Help, --help and the README's command list come from these
// values; TestUsageNamesEveryFlag and TestREADMECommands keep them in
// agreement (go test ./experiments -run TestREADMECommands -update
// rewrites the README block). In a Runner: bad input is usageError (exit
// 2), checked before any work (checkReportFlags, checkOutDir and
// checkOutFile check --out without creating it); a failed check is
// errChecksFailed (exit 1, emit does it for a report); an interrupt returns
// interruptedf("interrupted at …; checkpoint saved to …") or any error
// wrapping context.Canceled (exit 130); anything else is an internal error
// (exit 3).
//
// What it does not own: the model (models), planning (planner), the
// arena executor (planner/arena) and the rendering of reports (reports).
package experiments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"

	"gptlab/reports"
)

// Options are the settings every lab shares. There is no "quick" here:
// --quick is the lab's own quick function, applied to its config by the
// registry (Lab.Config) before Run sees it.
type Options struct {
	Seed int64     // --seed: every random choice of the run derives from it
	Log  io.Writer // progress for a person; io.Discard under --format json
	Out  string    // --out DIR, or ""; labs that make large side files may use it
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
	quick  func(cfg any) // shrinks *cfg for --quick; nil: the lab is quick already
	run    func(ctx context.Context, cfg any, opt Options) (*reports.Report, error)
}

// ErrNotBuilt is returned when a lab is named but not built yet.
var ErrNotBuilt = errors.New("not built yet")

var registry = map[string]*Lab{}

// Register adds a built lab from its file's init:
//
//   - defaults is the config struct (not a pointer) whose fields hold the
//     default values; fields carry `set:"key"` and `help:"..."` tags.
//   - quick shrinks a config for --quick: it only assigns config fields
//     (fewer steps, a smaller preset), so that the lab runs well under a
//     minute on 2 cores with every check still meaningful; nil if the lab
//     is that quick already. The registry applies it to the defaults before
//     the user's --set values, so what the user sets explicitly wins and is
//     validated like any other value.
//   - run does the work. It must not look for --quick (there is no such
//     option); it validates *cfg, returning errors made by usageError for
//     bad values, and it resolves every "0 means the default" setting in
//     *cfg to the value it used: the report's config is *cfg after run, so
//     it shows what actually ran.
func Register[C any](name, short string, defaults C, quick func(*C), run func(ctx context.Context, cfg *C, opt Options) (*reports.Report, error)) {
	if _, dup := registry[name]; dup && registry[name].Built {
		panic("experiments: lab registered twice: " + name)
	}
	l := &Lab{
		Name:   name,
		Short:  short,
		Built:  true,
		config: func() any { c := defaults; cloneSlices(&c); return &c },
		run: func(ctx context.Context, cfg any, opt Options) (*reports.Report, error) {
			return run(ctx, cfg.(*C), opt)
		},
	}
	if quick != nil {
		l.quick = func(cfg any) { quick(cfg.(*C)) }
	}
	registry[name] = l
}

// Config returns a fresh config of the lab: its defaults, shrunk by the
// lab's quick function when quick is set, then overridden by sets
// (key=value; later ones win). An unknown key or a value of the wrong type
// is an error wrapping ErrUsage.
func (l *Lab) Config(quick bool, sets []string) (any, error) {
	if !l.Built {
		return nil, fmt.Errorf("lab %q is in the design but %w (it comes with its own issue)", l.Name, ErrNotBuilt)
	}
	cfg := l.config()
	if quick && l.quick != nil {
		l.quick(cfg)
	}
	if err := applySets(cfg, sets); err != nil {
		return nil, err
	}
	return cfg, nil
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

// cloneSlices gives every slice field of *cfg its own backing array, so a
// lab that edits its config in place cannot change the registered defaults.
func cloneSlices(cfg any) {
	rv := reflect.ValueOf(cfg).Elem()
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if f.Kind() == reflect.Slice && !f.IsNil() && f.CanSet() {
			c := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
			reflect.Copy(c, f)
			f.Set(c)
		}
	}
}
