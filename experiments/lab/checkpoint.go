package lab

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gptlab/models"
	"gptlab/planner/recompute"
	"gptlab/reports"
)

// Checkpointing policies, as --set checkpoint=… names them:
//
//	none        the plain step: every activation kept for the backward
//	every:K     keep the input of every K-th layer; recompute each stretch
//	sqrt        keep ⌈√L⌉ evenly spaced layer inputs (Chen et al.)
//	selective   keep everything but attention's softmax/dropout core,
//	            recomputed from q and k (Megatron's selective recomputation)
//	budget:B    the cheapest schedule whose planned peak fits B bytes (B may
//	            say KiB, MiB or GiB, or be a fraction of none's peak: 0.5),
//	            found by the dynamic program over the chain's sizes and a
//	            FLOP/byte cost (models.DefaultCost): the same on every run

// CheckpointPolicy is a checkpointing policy as --set names it: parsed
// once, where the setting is read (UnmarshalText), and fitted to a model
// by Check. The zero CheckpointPolicy is none.
type CheckpointPolicy struct {
	Name  string  // as given: "every:2", "budget:24MiB"
	Kind  string  // none, every, sqrt, selective, budget
	K     int     // every:K
	Bytes int64   // budget:B in bytes, or 0
	Frac  float64 // budget:F as a fraction of none's peak, or 0
}

// NoCheckpoint is the plain step: every activation kept.
var NoCheckpoint = CheckpointPolicy{Name: "none", Kind: "none"}

// MarshalText is the policy as it was given ("none" for the zero policy).
func (p CheckpointPolicy) MarshalText() ([]byte, error) {
	if p.Name == "" {
		return []byte(NoCheckpoint.Name), nil
	}
	return []byte(p.Name), nil
}

// UnmarshalText reads a policy's syntax; whether it fits a model (K at
// most the layer count) is Check's.
func (p *CheckpointPolicy) UnmarshalText(b []byte) error {
	s := string(b)
	q := CheckpointPolicy{Name: s}
	kind, arg, hasArg := strings.Cut(s, ":")
	q.Kind = kind
	switch kind {
	case "none", "sqrt", "selective":
		if hasArg {
			return fmt.Errorf("%s takes no argument", kind)
		}
	case "every":
		k, err := strconv.Atoi(arg)
		if !hasArg || err != nil {
			return errors.New("want every:K with K a whole number of layers")
		}
		q.K = k
	case "budget":
		if !hasArg {
			return errors.New("want budget:BYTES (e.g. budget:24MiB) or budget:FRACTION of none's peak (e.g. budget:0.5)")
		}
		if f, err := strconv.ParseFloat(arg, 64); err == nil && f > 0 && f <= 1 && strings.Contains(arg, ".") {
			q.Frac = f
			break
		}
		b, err := ParseBytes(arg)
		if err != nil || b <= 0 {
			return fmt.Errorf("%q is neither a size in bytes (KiB, MiB, GiB) nor a fraction in (0, 1]", arg)
		}
		q.Bytes = b
	default:
		return errors.New("unknown policy (want none, every:K, sqrt, selective or budget:B)")
	}
	*p = q
	return nil
}

// Check fits the policy to a model of the given layer count.
func (p CheckpointPolicy) Check(layers int) error {
	if p.Kind == "every" && (p.K < 1 || p.K > layers) {
		return fmt.Errorf("every:K with K = %d: want 1 to the layer count %d", p.K, layers)
	}
	return nil
}

// ParseCheckpoint reads a policy s of the setting key for a model of the
// given layer count, for settings that hold several (a lab's list). A bad
// value is a usage error naming it.
func ParseCheckpoint(key, s string, layers int) (CheckpointPolicy, error) {
	var p CheckpointPolicy
	err := p.UnmarshalText([]byte(s))
	if err == nil {
		err = p.Check(layers)
	}
	if err != nil {
		return p, Usagef("--set %s=%s: %v", key, s, err)
	}
	return p, nil
}

// ParseBytes reads 1048576, 1024KiB, 1MiB, 0.5GiB.
func ParseBytes(s string) (int64, error) {
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsInf(f, 0) || f*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return int64(f * mult), nil
}

// KeptLayers are the layer inputs a fixed boundary policy keeps in a
// model of the given layer count (layer 0's is always kept).
func (p CheckpointPolicy) KeptLayers(layers int) []int {
	var keep []int
	switch p.Kind {
	case "every":
		for l := p.K; l < layers; l += p.K {
			keep = append(keep, l)
		}
	case "sqrt":
		k := int(math.Ceil(math.Sqrt(float64(layers))))
		for i := 1; i < k; i++ {
			keep = append(keep, int(math.Round(float64(i*layers)/float64(k))))
		}
	}
	return keep
}

// FixedSchedule is the step schedule of a policy that needs no search.
func (p CheckpointPolicy) FixedSchedule(cfg models.Config) (models.StepSchedule, error) {
	switch p.Kind {
	case "none", "":
		return models.PlainStepSchedule(cfg), nil
	case "selective":
		return models.PlainStepSchedule(cfg).Selective(cfg), nil
	case "every", "sqrt":
		return models.CheckpointStepSchedule(cfg, p.KeptLayers(cfg.Layers))
	}
	return models.StepSchedule{}, fmt.Errorf("policy %s needs the chain's measurements", p.Name)
}

// Chain is a config's chain for the budget search: sizes from the
// planned arena, times from a deterministic cost model (models.CostModel),
// so the schedule a budget gets is the same on every run.
type Chain struct {
	Links     []recompute.Link // the search's: times are the cost model's seconds
	Measured  []recompute.Link // the same links with profiled times, for reporting only (nil unprofiled)
	In        int64            // the chain input's bytes
	PlainPeak int64            // none's planned arena
	Offset    int64            // planned peak minus the model's, for the plain step
	Cost      models.CostModel // the cost model of Links' times
}

// MeasureChain measures cfg's chain on a batch (see models.MeasureChain)
// with the default cost model; runs > 0 profiles the plain step's ops too,
// for Measured (reporting only: the search never reads it).
func MeasureChain(cfg models.Config, p *models.Params, B, T int, idx, tgt []int32, runs int) (*Chain, error) {
	return MeasureChainCost(cfg, p, B, T, idx, tgt, runs, models.DefaultCost)
}

// MeasureChainCost is MeasureChain with the search's cost model given.
func MeasureChainCost(cfg models.Config, p *models.Params, B, T int, idx, tgt []int32, runs int, cost models.CostModel) (*Chain, error) {
	mc, err := models.MeasureChain(cfg, p, B, T, idx, tgt, runs, cost)
	if err != nil {
		return nil, err
	}
	_, model, err := recompute.Simulate(mc.Links, mc.In, recompute.Chen(len(mc.Links), nil, nil))
	if err != nil {
		return nil, err
	}
	return &Chain{Links: mc.Links, Measured: mc.Measured, In: mc.In, PlainPeak: mc.PlainPeak, Offset: mc.PlainPeak - model, Cost: cost}, nil
}

// MeasuredTime is the measured chain's time of moves (the sum of the
// profiled segment times they run), in seconds, and false when the chain
// was not profiled: a figure to report beside the cost, not to choose by.
func (c *Chain) MeasuredTime(moves recompute.Moves) (float64, bool) {
	if c.Measured == nil {
		return 0, false
	}
	t, _, err := recompute.Simulate(c.Measured, c.In, moves)
	return t, err == nil
}

// SearchQuantum is how finely the bisection for the smallest feasible
// budget counts memory: the budget in this many units (sizes round up, so
// what it finds is feasible exactly too).
const SearchQuantum = 4096

// ErrBudget marks a budget no schedule fits.
var ErrBudget = errors.New("below the smallest feasible peak")

// BudgetResult is the schedule the search chose for a budget.
type BudgetResult struct {
	Moves    recompute.Moves
	Schedule models.StepSchedule
	Peak     int64   // planned
	Time     float64 // the cost model's, in seconds
	Tries    int     // compilations until the planned peak fit
}

// BestWithin finds the cheapest schedule (in the chain's cost model) whose
// planned arena fits budget: the dynamic program on the model's memory
// (the planned peak less the plain step's offset), its schedule planned
// for real, and the model's budget lowered by any excess until the
// planned peak fits. plan compiles a schedule and returns its planned
// peak.
func (c *Chain) BestWithin(budget int64, plan func(models.StepSchedule) (int64, error)) (BudgetResult, error) {
	model := budget - c.Offset
	for try := 1; try <= 8; try++ {
		if model <= 0 {
			break
		}
		s, err := recompute.Optimal(c.Links, c.In, model, 1, true) // exact: a GPT's links are of few kinds, so few memory values recur
		if errors.Is(err, recompute.ErrBudget) {
			break
		}
		if err != nil {
			return BudgetResult{}, err
		}
		sched := models.FromMoves(s.Moves)
		peak, err := plan(sched)
		if err != nil {
			return BudgetResult{}, err
		}
		if peak <= budget {
			return BudgetResult{Moves: s.Moves, Schedule: sched, Peak: peak, Time: s.Time, Tries: try}, nil
		}
		model -= peak - budget
	}
	return BudgetResult{}, fmt.Errorf("%w", ErrBudget)
}

// SmallestFeasible is the smallest model budget the dynamic program
// finds a schedule for, plus the offset: about the smallest planned peak
// any schedule reaches (bisection to a quantum).
func (c *Chain) SmallestFeasible() int64 {
	lo, hi := int64(0), c.PlainPeak-c.Offset // infeasible, feasible
	for hi-lo > max(hi/SearchQuantum, 1) {
		mid := (lo + hi) / 2
		if _, err := recompute.Optimal(c.Links, c.In, mid, mid/SearchQuantum+1, true); err == nil {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi + c.Offset
}

// ResolveCheckpoint turns a --set checkpoint policy into the step
// schedule of cfg's training step (nil for none: the plain model). A
// policy that does not fit cfg, and a budget below the smallest feasible
// peak, are usage errors naming the setting (and that minimum). A budget
// is searched on the chain's planned sizes and its FLOP/byte cost, so the
// same policy gives the same schedule on every run.
func ResolveCheckpoint(pol CheckpointPolicy, cfg models.Config, p *models.Params, B, T int, idx, tgt []int32) (*models.StepSchedule, error) {
	if err := pol.Check(cfg.Layers); err != nil {
		return nil, Usagef("--set checkpoint=%s: %v", pol.Name, err)
	}
	switch pol.Kind {
	case "none", "":
		return nil, nil
	case "budget":
	default:
		s, err := pol.FixedSchedule(cfg)
		return &s, err
	}
	ch, err := MeasureChain(cfg, p, B, T, idx, tgt, 0) // the cost model's: nothing timed
	if err != nil {
		return nil, err
	}
	budget := pol.Bytes
	if pol.Frac > 0 {
		budget = int64(pol.Frac * float64(ch.PlainPeak))
	}
	plan := func(s models.StepSchedule) (int64, error) {
		m, err := models.NewModel(cfg, p, B, T, true, models.WithStepSchedule(s))
		if err != nil {
			return 0, err
		}
		defer m.Close()
		return m.Arena().Stats().ArenaBytes, nil
	}
	br, err := ch.BestWithin(budget, plan)
	if errors.Is(err, ErrBudget) {
		return nil, Usagef("--set checkpoint=%s: %s is below the smallest feasible peak, about %s (none's is %s)",
			pol.Name, FormatBytes(budget), FormatBytes(ch.SmallestFeasible()), FormatBytes(ch.PlainPeak))
	}
	if err != nil {
		return nil, err
	}
	return &br.Schedule, nil
}

// FormatBytes is b in KiB, MiB or GiB as reports print sizes.
func FormatBytes(b int64) string { return reports.FormatBytes(float64(b)) }
