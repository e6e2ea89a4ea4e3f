package lab

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/models"
)

// TestCheckpointPolicyErrors: a policy that does not exist or does not fit
// the model is refused with one line naming it.
func TestCheckpointPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"every:0", "want 1 to the layer count"},
		{"every:3", "want 1 to the layer count 2"},
		{"every:x", "whole number"},
		{"often", "unknown policy"},
		{"sqrt:2", "takes no argument"},
		{"budget:", "neither a size"},
		{"budget:lots", "neither a size"},
		{"budget", "want budget:BYTES"},
	} {
		_, err := ParseCheckpoint("checkpoint", tc.policy, 2)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--set checkpoint="+tc.policy+": ") ||
			!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseCheckpoint(%q) = %v, want one line saying %q", tc.policy, err, tc.want)
		}
	}
	for _, ok := range []string{"none", "every:1", "every:2", "sqrt", "selective", "budget:12MiB", "budget:0.5", "budget:100000"} {
		p, err := ParseCheckpoint("checkpoint", ok, 2)
		if err != nil {
			t.Errorf("ParseCheckpoint(%q) = %v", ok, err)
		}
		if b, _ := p.MarshalText(); string(b) != ok {
			t.Errorf("ParseCheckpoint(%q) reads back as %q", ok, b)
		}
	}
}

// chainBatch is a batch for measuring cfg's chain.
func chainBatch(cfg models.Config) (idx, tgt []int32) {
	n := cfg.Batch * cfg.Block
	idx, tgt = make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i], tgt[i] = int32(i%cfg.Vocab), int32((i+1)%cfg.Vocab)
	}
	return idx, tgt
}

// planner compiles a schedule of cfg and returns its planned peak.
func planner(cfg models.Config, p *models.Params) func(models.StepSchedule) (int64, error) {
	return func(s models.StepSchedule) (int64, error) {
		m, err := models.NewModel(cfg, p, cfg.Batch, cfg.Block, true, models.WithStepSchedule(s))
		if err != nil {
			return 0, err
		}
		defer m.Close()
		return m.Arena().Stats().ArenaBytes, nil
	}
}

// TestChainIgnoresTheClock: the chain the budget search runs on is the
// same every time it is measured, profiled or not (sizes from the planned
// arena, times from a fixed cost model), so a budget gets the same
// schedule on every run, and --set checkpoint=budget:F resolves to the
// same schedule every time. On the code before, the links' times were the
// profiled ones and differed from one measurement to the next.
func TestChainIgnoresTheClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string    // as gpt train takes it
		fracs  []float64 // of none's peak (tiny's smallest is about 0.75)
	}{{"tiny", "budget:0.8", []float64{0.8, 0.9}}, {"small", "budget:0.5", []float64{0.5, 0.75}}} {
		name := tc.name
		if name == "small" && testutil.Trimmed() {
			t.Logf("small: skipped under -short when emulated (tiny's chain checks the same emulated; small runs natively)")
			continue
		}
		cfg, _ := models.Preset(name)
		cfg.Dropout = 0.1
		p := models.NewParams(cfg, 1)
		idx, tgt := chainBatch(cfg)
		a, err := MeasureChain(cfg, p, cfg.Batch, cfg.Block, idx, tgt, 2)
		if err != nil {
			t.Fatal(err)
		}
		b, err := MeasureChain(cfg, p, cfg.Batch, cfg.Block, idx, tgt, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Links, b.Links) {
			t.Errorf("%s: two measurements of the chain differ:\n%+v\n%+v", name, a.Links, b.Links)
		}
		for _, frac := range tc.fracs {
			budget := int64(frac * float64(a.PlainPeak))
			ra, errA := a.BestWithin(budget, planner(cfg, p))
			rb, errB := b.BestWithin(budget, planner(cfg, p))
			if errA != nil || errB != nil {
				t.Fatalf("%s at %.2f of none's peak: %v, %v", name, frac, errA, errB)
			}
			if ra.Moves.String() != rb.Moves.String() || ra.Peak != rb.Peak {
				t.Errorf("%s at %.2f of none's peak: %v (%d B) against %v (%d B)", name, frac, ra.Moves, ra.Peak, rb.Moves, rb.Peak)
			}
		}
		var pol CheckpointPolicy
		if err := pol.UnmarshalText([]byte(tc.policy)); err != nil {
			t.Fatal(err)
		}
		var first *models.StepSchedule
		for range 3 {
			s, err := ResolveCheckpoint(pol, cfg, p, cfg.Batch, cfg.Block, idx, tgt)
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = s
			} else if !reflect.DeepEqual(s, first) {
				t.Errorf("%s: %s resolves to %v, then to %v", name, tc.policy, first, s)
			}
		}
	}
}

// TestBudgetChoiceFollowsTheCostModel: the search reads the cost model it
// is given and nothing measured: a chain whose profiled times are
// scrambled gets the same schedule at every budget, while another cost
// model's times are what the chain's links carry.
func TestBudgetChoiceFollowsTheCostModel(t *testing.T) {
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 1)
	idx, tgt := chainBatch(cfg)
	ch, err := MeasureChain(cfg, p, cfg.Batch, cfg.Block, idx, tgt, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Measured) != len(ch.Links) || ch.Cost != models.DefaultCost {
		t.Fatalf("a profiled chain: %d measured links of %d, cost model %+v", len(ch.Measured), len(ch.Links), ch.Cost)
	}
	scrambled := *ch
	scrambled.Measured = slices.Clone(ch.Measured)
	for i := range scrambled.Measured { // a clock gone wild: the last link looks a hundred times dearer
		scrambled.Measured[i].Fwd *= float64(1 + 99*(i%2))
		scrambled.Measured[i].Bwd *= float64(100 - 99*(i%2))
	}
	for _, frac := range []float64{0.76, 0.85, 0.95, 1} {
		budget := int64(frac * float64(ch.PlainPeak))
		a, errA := ch.BestWithin(budget, planner(cfg, p))
		b, errB := scrambled.BestWithin(budget, planner(cfg, p))
		if (errA == nil) != (errB == nil) || a.Moves.String() != b.Moves.String() {
			t.Errorf("at %.2f of none's peak: %v (%v) against %v (%v) with the clock scrambled", frac, a.Moves, errA, b.Moves, errB)
		}
		if m, ok := ch.MeasuredTime(a.Moves); errA == nil && (!ok || m <= 0) {
			t.Errorf("at %.2f of none's peak: measured time %v, %v", frac, m, ok)
		}
	}
	slow := models.CostModel{FlopsPerSecond: models.DefaultCost.FlopsPerSecond / 2, BytesPerSecond: models.DefaultCost.BytesPerSecond / 2}
	half, err := MeasureChainCost(cfg, p, cfg.Batch, cfg.Block, idx, tgt, 0, slow)
	if err != nil {
		t.Fatal(err)
	}
	if half.Measured != nil {
		t.Error("an unprofiled chain has measured times")
	}
	for i, l := range half.Links {
		if d := ch.Links[i]; math.Abs(l.Fwd-2*d.Fwd) > 1e-12 || math.Abs(l.Bwd-2*d.Bwd) > 1e-12 || l.Out != d.Out || l.Saved != d.Saved {
			t.Errorf("link %d at half the speed: %+v, at the default %+v", i, l, d)
		}
	}
}
