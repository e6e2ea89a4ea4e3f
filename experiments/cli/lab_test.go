package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gptlab/experiments/gpt"
	"gptlab/experiments/lab"
)

// TestLabConfigQuick: --quick is the lab's own quick function, applied to
// the defaults before the user's --set values, which win and are validated
// either way.
func TestLabConfigQuick(t *testing.T) {
	gl, err := Find("gpt")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := gl.Config(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.(*lab.Train); c.Config != "tiny" || c.Batch != 16 || c.Iters != 1500 {
		t.Errorf("gpt --quick = config %s, batch %d, iters %d; want tiny, 16, 1500", c.Config, c.Batch, c.Iters)
	}
	cfg, err = gl.Config(true, []string{"config=small", "batch=3", "iters=30", "warmup=3"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.(*lab.Train); c.Config != "small" || c.Batch != 3 || c.Iters != 30 || c.EvalBatches != 10 {
		t.Errorf("gpt --quick --set config=small,batch=3,iters=30 = %s, %d, %d, eval-batches %d; want small, 3, 30 and quick's 10",
			c.Config, c.Batch, c.Iters, c.EvalBatches)
	}
	if cfg, err = gl.Config(false, nil); err != nil || cfg.(*lab.Train).Config != "small" {
		t.Errorf("gpt without --quick: config %v, %v; want the default small", cfg, err)
	}
	// The defaults were not changed by the quick run before.
	if gpt.Defaults.Config != "small" || gpt.Defaults.Iters != 2000 {
		t.Errorf("gpt defaults changed: %+v", gpt.Defaults)
	}
	arena, _ := Find("arena")
	cfg, _ = arena.Config(true, nil)
	configs, _ := lab.Values(cfg).Get("configs")
	steps, _ := lab.Values(cfg).Get("steps")
	if c, _ := configs.([]string); strings.Join(c, ",") != "tiny,small" || steps != 2 {
		t.Errorf("arena --quick = configs %v, steps %v; want tiny,small and 2", configs, steps)
	}
	cfg, _ = arena.Config(false, nil)
	if configs, _ := lab.Values(cfg).Get("configs"); len(configs.([]string)) != 3 {
		t.Errorf("arena defaults after a quick config: %v, want three presets", configs)
	}
	for _, l := range Labs() {
		if !l.Built {
			if _, err := l.Config(true, nil); !errors.Is(err, lab.ErrNotBuilt) {
				t.Errorf("Config of %s, not built = %v, want lab.ErrNotBuilt", l.Name, err)
			}
			break
		}
	}
}

// TestQuickValuesValidated: values set beside --quick are checked, not
// dropped (run gpt --quick --set config=huge once exited 0).
func TestQuickValuesValidated(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "gpt", "--quick", "--set", "config=huge"}, "config=huge"},
		{[]string{"run", "gpt", "--quick", "--set", "batch=-3"}, "batch=-3"},
		{[]string{"run", "arena", "--quick", "--set", "configs=tiny,huge"}, "huge"},
		{[]string{"run", "reuse", "--quick", "--set", "seeds=0"}, "seeds=0"},
	} {
		code, _, errs := runMain(tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("Main(%q) = %d, stderr %q; want 2 naming %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestReportConfigShowsValuesUsed: settings whose 0 means a default are
// reported with the value that ran.
func TestReportConfigShowsValuesUsed(t *testing.T) {
	l, _ := Find("gpt")
	cfg := &lab.Train{Config: "tiny", Iters: 4, LR: 1e-2, Beta2: 0.95, EvalBatches: 1}
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"batch": 2, "eval-every": 1, "beta2": 0.95} {
		if got, _ := r.Config.Get(k); got != want {
			t.Errorf("report config %s = %v, want %v (the value used)", k, got, want)
		}
	}
}
