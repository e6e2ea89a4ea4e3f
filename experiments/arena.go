package experiments

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"gonum.org/v1/plot/vg"
	G "gorgonia.org/gorgonia"

	"gptlab/models"
	"gptlab/planner"
	"gptlab/planner/arena"
	"gptlab/reports"
)

// arenaConfig: which GPT configs to plan and how.
type arenaConfig struct {
	Configs   []string `set:"configs" help:"GPT presets to plan (tiny, small, baby)"`
	Alignment int64    `set:"alignment" help:"arena alignment in bytes (a power of two)"`
	Algo      string   `set:"algo" help:"planner the executor uses"`
	InPlace   bool     `set:"in-place" help:"let elementwise ops write over an input when legal"`
}

func init() {
	Register("arena", "the GPT's graph run from one planned arena: lifetimes, peak, speed",
		arenaConfig{Configs: []string{"tiny", "small", "baby"}, Alignment: 64, Algo: "greedy-by-size", InPlace: true}, runArena)
}

func runArena(ctx context.Context, cfg *arenaConfig, opt Options) (*reports.Report, error) {
	if cfg.Alignment <= 0 || cfg.Alignment&(cfg.Alignment-1) != 0 {
		return nil, usageError("--set alignment=%d: not a power of two", cfg.Alignment)
	}
	algo, err := planner.Lookup(cfg.Algo)
	if err != nil {
		return nil, usageError("--set algo=%s: %v", cfg.Algo, err)
	}
	configs := cfg.Configs
	if opt.Quick && len(configs) > 2 {
		configs = configs[:2]
	}
	r := reports.New("arena", "The GPT's graph run from one planned arena")
	sizes := r.AddTable("Intermediates of one step: naive sum, lower bound and the planned arena ("+algo.Name+")",
		"config", "pass", "ops", "planned", "in place", "naive bytes", "bound bytes", "arena bytes", "arena/bound", "outside bytes",
		"kernel ops", "UsePreallocDo ops", "allocating ops")
	planners := r.AddTable("Every planner on the same lifetimes (training step)",
		"config", "planner", "arena bytes", "ratio to bound", "saved vs naive", "slots", "plan ms")
	wall := r.AddTable("The activation wall: what training adds to the forward pass",
		"config", "forward arena bytes", "training arena bytes", "ratio")
	parity := r.AddTable("Arena executor against the TapeMachine (same graph, same batch)",
		"config", "pass", "outputs compared", "max |diff|", "bitwise")
	var lastProgram *arena.Program
	for _, name := range configs {
		mc, err := models.Preset(name)
		if err != nil {
			return nil, usageError("--set configs=%s: %v", name, err)
		}
		var fwdArena int64
		for _, train := range []bool{false, true} {
			pass := "forward"
			if train {
				pass = "training"
			}
			fmt.Fprintf(opt.Log, "arena: %s %s\n", name, pass)
			st, p, diff, n, err := arenaCase(ctx, mc, opt.Seed, train, arena.Options{Algorithm: algo, Alignment: cfg.Alignment, InPlace: cfg.InPlace})
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, pass, err)
			}
			sizes.Row(name, pass, st.Steps, st.Planned, st.InPlace, st.NaiveBytes, st.BoundBytes, st.ArenaBytes,
				ratio(st.ArenaBytes, st.BoundBytes), st.OutsideBytes, st.Kernels, st.Prealloc, st.Allocating)
			parity.Row(name, pass, n, diff, diff == 0)
			r.Check(fmt.Sprintf("%s %s: arena run equals the TapeMachine's", name, pass), diff == 0,
				"%d outputs (loss, logits%s), max |diff| %g", n, map[bool]string{true: ", every gradient"}[train], diff)
			r.Check(fmt.Sprintf("%s %s: arena between bound and naive", name, pass),
				st.BoundBytes <= st.ArenaBytes && st.ArenaBytes < st.NaiveBytes,
				"bound %d <= arena %d < naive %d", st.BoundBytes, st.ArenaBytes, st.NaiveBytes)
			if !train {
				fwdArena = st.ArenaBytes
				continue
			}
			wall.Row(name, fwdArena, st.ArenaBytes, ratio(st.ArenaBytes, fwdArena))
			prob, _ := p.Problem()
			for _, a := range planner.Algorithms() {
				t0 := time.Now()
				pl, err := a.Run(ctx, prob)
				if err != nil {
					return nil, fmt.Errorf("%s: planner %s: %w", name, a.Name, err)
				}
				planners.Row(name, a.Name, pl.Peak, ratio(pl.Peak, prob.Bound()), prob.Naive()-pl.Peak, pl.Slots(),
					float64(time.Since(t0).Microseconds())/1000)
			}
			lastProgram = p
			r.Metric(name+"_training_arena_bytes", st.ArenaBytes)
			r.Metric(name+"_training_bound_bytes", st.BoundBytes)
			r.Metric(name+"_training_naive_bytes", st.NaiveBytes)
		}
	}
	if lastProgram != nil {
		prob, plan := lastProgram.Problem()
		plt, err := planner.Timeline(fmt.Sprintf("%s training step: the planned arena (%s)", configs[len(configs)-1], algo.Name), prob, plan, plan.Peak)
		if err != nil {
			return nil, err
		}
		r.AddFigure("arena-timeline", plt, 8*vg.Inch, 4*vg.Inch)
		out := r.AddTable("Op outputs outside the arena (last config, training)", "op", "outputs", "bytes", "why")
		for _, o := range groupOutside(lastProgram.Outside()) {
			out.Row(o.Op, o.Node, o.Bytes, o.Reason)
		}
	}
	return r, nil
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// arenaCase builds the GPT for one config and pass, runs one batch through
// the TapeMachine and through the arena, and compares every retained
// output.
func arenaCase(ctx context.Context, mc models.Config, seed int64, train bool, o arena.Options) (arena.Stats, *arena.Program, float64, int, error) {
	params := models.NewParams(mc, seed)
	m, err := models.NewModel(mc, params, mc.Batch, mc.Block, train, models.WithTapeMachine())
	if err != nil {
		return arena.Stats{}, nil, 0, 0, err
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	idx := make([]int32, mc.Batch*mc.Block)
	tgt := make([]int32, len(idx))
	for i := range idx {
		idx[i] = int32(rng.IntN(mc.Vocab))
		tgt[i] = int32(rng.IntN(mc.Vocab))
	}
	if _, err := m.Step(idx, tgt); err != nil {
		return arena.Stats{}, nil, 0, 0, err
	}
	retain := G.Nodes{m.LossNode(), m.LogitsNode()}
	retain = append(retain, m.GradNodes()...)
	want := make([][]float32, len(retain))
	for i, n := range retain {
		want[i] = append([]float32(nil), valueFloats(n.Value())...)
	}
	p, err := arena.Compile(ctx, m.Graph(), retain, o)
	if err != nil {
		return arena.Stats{}, nil, 0, 0, err
	}
	if err := p.Run(); err != nil {
		return arena.Stats{}, nil, 0, 0, err
	}
	var diff float64
	for i, n := range retain {
		got := valueFloats(p.Value(n))
		if len(got) != len(want[i]) {
			return arena.Stats{}, nil, 0, 0, fmt.Errorf("%v: %d values from the arena, %d from the TapeMachine", n, len(got), len(want[i]))
		}
		for j := range got {
			d := float64(got[j]) - float64(want[i][j])
			diff = max(diff, d, -d)
		}
	}
	return p.Stats(), p, diff, len(retain), nil
}

func valueFloats(v G.Value) []float32 {
	switch x := v.(type) {
	case *G.F32:
		return []float32{float32(*x)}
	case nil:
		return nil
	default:
		if d, ok := v.Data().([]float32); ok {
			return d
		}
		if f, ok := v.Data().(float32); ok {
			return []float32{f}
		}
	}
	return nil
}

// groupOutside sums the outside outputs by op kind and reason.
func groupOutside(os []arena.Outside) []arena.Outside {
	type key struct{ op, reason string }
	sum := map[key]*arena.Outside{}
	count := map[key]int{}
	for _, o := range os {
		k := key{opKind(o.Op), o.Reason}
		if sum[k] == nil {
			sum[k] = &arena.Outside{Op: k.op, Reason: o.Reason}
		}
		sum[k].Bytes += o.Bytes
		count[k]++
	}
	out := make([]arena.Outside, 0, len(sum))
	for k, o := range sum {
		o.Node = fmt.Sprint(count[k])
		out = append(out, *o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out
}

// opKind strips an op's shape details: "Reshape(2, 3)" -> "Reshape".
func opKind(op string) string {
	for i, c := range op {
		if c == '(' || c == '[' || c == '{' {
			return op[:i]
		}
	}
	return op
}
