// Package lab is the base every lab of gptlab stands on: the Lab value (a
// name, one line, a config struct of defaults, a quick function and a
// Run), the settings a lab's config struct declares with `set:"key"` and
// `help:"..."` tags and --set key=value overrides, the errors of the
// exit-status contract (ErrUsage: exit 2; ErrInterrupted: exit 130;
// ErrInternal: exit 3), the statistics labs share, the GPT training
// settings the gpt and precision labs and `gptlab gpt train` share, the
// checkpointing policies, the progress bar, the multi-process runner
// (OnRanks) and the runner of the PyTorch peers beside a lab (RunPeer).
//
// Adding a lab: a package under experiments/ that exports
//
//	var Lab = lab.New("serving", "paged-KV serving simulator", defaults, quick, run)
//
// and a line in experiments/cli/labs.go, the one ordered list of labs.
// quick (when --quick is given) and then the user's --set values, which
// win, are applied to the defaults; run validates the config (errors from
// Usagef exit 2, one line naming the key), resolves every "0 means the
// default" setting in place to the value it used, and returns a report
// built with package reports: typed columns (reports.Bytes, Float, Ratio,
// Duration, …) so text fits 100 columns and JSON keeps exact values; no
// column that never changes (say it with Table.Constant). Run gets a
// context that Ctrl-C and SIGTERM cancel; a lab should return soon after.
// No lab imports another: what two labs share lives here or in the
// library package that owns it.
//
// What it does not own: the commands and the list of labs
// (experiments/cli), the model (models), planning (planner), the arena
// executor (planner/arena) and the rendering of reports (reports).
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"

	"gptlab/reports"
)

// Options are the settings every lab shares. There is no "quick" here:
// --quick is the lab's own quick function, applied to its config by the
// Lab.Config before Run sees it.
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

// New makes a built lab:
//
//   - defaults is the config struct (not a pointer) whose fields hold the
//     default values; fields carry `set:"key"` and `help:"..."` tags.
//   - quick shrinks a config for --quick: it only assigns config fields
//     (fewer steps, a smaller preset), so that the lab runs well under a
//     minute on 2 cores with every check still meaningful; nil if the lab
//     is that quick already. It is applied to the defaults before the
//     user's --set values, so what the user sets explicitly wins and is
//     validated like any other value.
//   - run does the work. It must not look for --quick (there is no such
//     option); it validates *cfg, returning errors made by Usagef for bad
//     values, and it resolves every "0 means the default" setting in *cfg
//     to the value it used: the report's config is *cfg after run, so it
//     shows what actually ran.
func New[C any](name, short string, defaults C, quick func(*C), run func(ctx context.Context, cfg *C, opt Options) (*reports.Report, error)) *Lab {
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
	return l
}

// Planned is a lab of the design that is not built yet: listed, and
// refused when run.
func Planned(name, short string) *Lab { return &Lab{Name: name, Short: short} }

// Defaults returns a fresh config holding the lab's defaults (nil for a
// lab not built).
func (l *Lab) Defaults() any {
	if !l.Built {
		return nil
	}
	return l.config()
}

// Run runs a built lab with a config (from Config; nil: the defaults)
// and fills in the report's config, which is the config after the lab
// resolved its defaults, and environment. A panic inside the lab (graph
// construction panics on shape errors) becomes an error.
func (l *Lab) Run(ctx context.Context, cfg any, opt Options) (r *reports.Report, err error) {
	if !l.Built {
		return nil, fmt.Errorf("lab %q: %w", l.Name, ErrNotBuilt)
	}
	if cfg == nil {
		cfg = l.Defaults()
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, PanicError("lab "+l.Name, p, opt.Log)
		}
	}()
	r, err = l.run(ctx, cfg, opt)
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	r.Lab = l.Name
	cv := Values(cfg)
	cv.Set("seed", opt.Seed)
	r.Config = cv
	r.Env = reports.CurrentEnv()
	return r, nil
}

// Config returns a fresh config of the lab: its defaults, shrunk by the
// lab's quick function when quick is set, then overridden by sets
// (key=value; later ones win). An unknown key or a value of the wrong type
// is an error wrapping ErrUsage.
func (l *Lab) Config(quick bool, sets []string) (any, error) {
	if !l.Built {
		return nil, fmt.Errorf("lab %q is %w", l.Name, ErrNotBuilt)
	}
	cfg := l.config()
	if quick && l.quick != nil {
		l.quick(cfg)
	}
	if err := ApplySets(cfg, sets); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ErrUsage marks bad usage or bad input: the command prints the message on
// one line and exits with status 2.
var ErrUsage = errors.New("bad usage")

// Usagef makes a bad-input error (exit status 2) whose text is the
// message alone; errors.Is(err, ErrUsage) holds for it.
func Usagef(format string, args ...any) error {
	return &badInput{msg: fmt.Sprintf(format, args...)}
}

type badInput struct{ msg string }

func (e *badInput) Error() string        { return e.msg }
func (e *badInput) Is(target error) bool { return target == ErrUsage }

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
