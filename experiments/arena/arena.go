package arena

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
	G "gorgonia.org/gorgonia"

	"gptlab/experiments/lab"
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
	Steps     int      `set:"steps" help:"training steps timed per executor"`
}

// Lab is the arena lab.
var Lab = lab.New("arena", "the GPT's graph run from one planned arena: lifetimes, peak, speed",
	arenaConfig{Configs: []string{"tiny", "small", "baby"}, Alignment: 64, Algo: "search", InPlace: true, Steps: 5},
	arenaQuick, runArena)

// arenaQuick plans and times the first two presets, two steps each.
func arenaQuick(c *arenaConfig) {
	c.Configs, c.Steps = c.Configs[:min(len(c.Configs), 2)], min(c.Steps, 2)
}

func runArena(ctx context.Context, cfg *arenaConfig, opt lab.Options) (*reports.Report, error) {
	if err := lab.CheckAlignment(cfg.Alignment); err != nil {
		return nil, err
	}
	if cfg.Steps < 1 || cfg.Steps > 10_000 {
		return nil, lab.Usagef("--set steps=%d: want 1 to 10000", cfg.Steps)
	}
	algo, err := planner.Lookup(cfg.Algo)
	if err != nil {
		return nil, lab.Usagef("--set algo=%s: %v", cfg.Algo, err)
	}
	if len(cfg.Configs) == 0 {
		return nil, lab.Usagef("--set configs=: name at least one preset (%s)", strings.Join(models.PresetNames(), ", "))
	}
	configs, steps := cfg.Configs, cfg.Steps
	for _, name := range configs {
		if _, err := models.Preset(name); err != nil {
			return nil, lab.Usagef("--set configs=%s: unknown preset %q (want %s)", strings.Join(configs, ","), name, strings.Join(models.PresetNames(), ", "))
		}
	}
	r := reports.New("arena", "The GPT's graph run from one planned arena")
	col, bytes, num, rat := reports.Text, reports.Bytes, reports.Int, reports.Ratio
	sizes := r.AddTable("Intermediates of one step: naive sum, lower bound and the planned arena ("+algo.Name+")",
		col("config"), col("pass"), num("ops"), num("planned"), num("in place"), bytes("naive"), bytes("bound"),
		bytes("arena"), rat("arena / bound"), bytes("outside"))
	planners := r.AddTable("Every planner on the same lifetimes (training step)",
		col("config"), col("planner"), bytes("arena"), rat("arena / bound"), bytes("saved vs naive"), num("slots"),
		reports.Float("plan (ms)", 3))
	wall := r.AddTable("The activation wall: what training adds to the forward pass",
		col("config"), bytes("forward arena"), bytes("training arena"), rat("training / forward"))
	parity := r.AddTable("Arena executor against the TapeMachine (same graph, same batch)",
		col("config"), col("pass"), num("outputs compared"), reports.Significant("max |diff|", 2), col("bitwise"))
	update := r.AddTable("The training step with the AdamW update: parameters in the schedule, updated in place",
		col("config"), num("parameter nodes"), col("donated"), num("updates legal in place"), bytes("arena"),
		rat("arena / bound"), col("why not (first refusal)"))
	speed := r.AddTable(fmt.Sprintf("One training step, TapeMachine against the arena (median of %d)", steps),
		col("config"), col("executor"), reports.Float("step (ms)", 2), num("allocs per step"), bytes("allocated per step"))
	streams := streamsTable(r, steps)
	var last *arenaResult
	for _, name := range configs {
		mc, _ := models.Preset(name) // checked above
		var fwdArena int64
		for _, train := range []bool{false, true} {
			pass := map[bool]string{false: "forward", true: "training"}[train]
			fmt.Fprintf(opt.Log, "arena: %s %s\n", name, pass)
			res, err := arenaCase(ctx, mc, opt.Seed, train, steps, arena.Options{Algorithm: algo, Alignment: cfg.Alignment, InPlace: cfg.InPlace})
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", name, pass, err)
			}
			st := res.stats
			sizes.Row(name, pass, st.Steps, st.Planned, st.InPlace, st.NaiveBytes, st.BoundBytes, st.ArenaBytes,
				lab.Ratio(st.ArenaBytes, st.BoundBytes), st.OutsideBytes)
			r.Check(fmt.Sprintf("%s %s: every op runs a kernel into the arena", name, pass),
				st.Kernels == st.Steps && st.Prealloc == 0 && st.Allocating == 0,
				"%d of %d ops run a kernel; %d through UsePreallocDo, %d allocating", st.Kernels, st.Steps, st.Prealloc, st.Allocating)
			parity.Row(name, pass, res.compared, res.diff, res.diff == 0)
			r.Check(fmt.Sprintf("%s %s: arena run equals the TapeMachine's", name, pass), res.diff == 0,
				"%d outputs (loss, logits%s), max |diff| %g", res.compared, map[bool]string{true: ", every gradient"}[train], res.diff)
			r.Check(fmt.Sprintf("%s %s: arena between bound and naive", name, pass),
				st.BoundBytes <= st.ArenaBytes && st.ArenaBytes < st.NaiveBytes,
				"bound %d <= arena %d < naive %d", st.BoundBytes, st.ArenaBytes, st.NaiveBytes)
			if !train {
				fwdArena = st.ArenaBytes
				continue
			}
			wall.Row(name, fwdArena, st.ArenaBytes, lab.Ratio(st.ArenaBytes, fwdArena))
			prob, _ := res.program.Problem()
			for _, a := range planner.Algorithms() {
				t0 := time.Now()
				pl, err := a.Run(ctx, prob)
				if err != nil {
					return nil, fmt.Errorf("%s: planner %s: %w", name, a.Name, err)
				}
				planners.Row(name, a.Name, pl.Peak, lab.Ratio(pl.Peak, prob.Bound()), prob.Naive()-pl.Peak, pl.Slots(),
					float64(time.Since(t0).Microseconds())/1000)
			}
			for _, u := range res.updates {
				update.Row(name, u.params, u.donated, u.legal, u.arena, lab.Ratio(u.arena, u.bound), u.refusal)
			}
			r.Check(name+": AdamW may update every donated parameter in place", res.updates[0].legal == res.updates[0].params,
				"%d of %d legal", res.updates[0].legal, res.updates[0].params)
			r.Check(name+": without donation every in-place update is refused", res.updates[1].legal == 0,
				"%d refused, %d legal; %s", res.updates[1].params-res.updates[1].legal, res.updates[1].legal, res.updates[1].refusal)
			for _, e := range res.speed {
				speed.Row(name, e.executor, e.stepMS, e.allocs, e.bytes)
			}
			r.Metric(name+"_training_arena_bytes", st.ArenaBytes)
			r.Metric(name+"_training_bound_bytes", st.BoundBytes)
			r.Metric(name+"_training_naive_bytes", st.NaiveBytes)
			r.Metric(name+"_arena_allocs_per_step", res.speed[1].allocs)
			r.Metric(name+"_tape_allocs_per_step", res.speed[0].allocs)
			fmt.Fprintf(opt.Log, "arena: %s training on two streams\n", name)
			s, err := streamsCase(ctx, mc, opt.Seed, steps, arena.Options{Algorithm: algo, Alignment: cfg.Alignment, InPlace: cfg.InPlace})
			if err != nil {
				return nil, fmt.Errorf("%s on two streams: %w", name, err)
			}
			addStreams(r, streams, name, s)
			last = res
		}
	}
	if err := matrixChain(ctx, r); err != nil {
		return nil, err
	}
	if last != nil {
		prob, plan := last.program.Problem()
		plt, err := planner.Timeline(fmt.Sprintf("%s training step: the planned arena (%s)", configs[len(configs)-1], algo.Name), prob, plan, plan.Peak)
		if err != nil {
			return nil, err
		}
		r.AddFigure("arena-timeline", plt, 8*vg.Inch, 4*vg.Inch)
		if outside := groupOutside(last.program.Outside()); len(outside) > 0 {
			out := r.AddTable("Op outputs outside the arena (last config, training)",
				reports.Text("op"), reports.Int("outputs"), reports.Bytes("bytes"), reports.Text("why"))
			for _, o := range outside {
				out.Row(o.Op, o.Node, o.Bytes, o.Reason)
			}
		} else {
			r.Note("Every op output of the training step lives in the arena: none is allocated outside it.")
		}
	}
	r.Note("Naive is every op output in storage of its own; the bound is the most bytes live at one instant; " +
		"parameters and tokens are the caller's and not counted, and dropout stores no masks (its kernels draw them). " +
		"Timings are wall-clock on a shared machine.")
	return r, nil
}

// arenaResult is what one config and pass measured.
type arenaResult struct {
	stats    arena.Stats
	program  *arena.Program
	diff     float64 // max |arena - TapeMachine| over every retained output
	compared int
	updates  []updateRow // training only: with and without donation
	speed    []speedRow  // training only: TapeMachine, then arena
}

type updateRow struct {
	params, legal int
	donated       bool
	arena, bound  int64
	refusal       string
}

type speedRow struct {
	executor      string
	stepMS        float64
	allocs, bytes float64
}

// arenaCase builds the GPT for one config and pass, runs one batch through
// the TapeMachine and through the arena, and compares every retained
// output; for training it also plans the AdamW update and times both
// executors.
func arenaCase(ctx context.Context, mc models.Config, seed int64, train bool, steps int, o arena.Options) (*arenaResult, error) {
	params := models.NewParams(mc, seed)
	m, err := models.NewModel(mc, params, mc.Batch, mc.Block, train, models.WithTapeMachine())
	if err != nil {
		return nil, err
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
		return nil, err
	}
	retain := G.Nodes{m.LossNode(), m.LogitsNode()}
	retain = append(retain, m.GradNodes()...)
	want := make([][]float32, len(retain))
	for i, n := range retain {
		want[i] = append([]float32(nil), lab.Floats(n.Value())...)
	}
	p, err := arena.Compile(ctx, m.Graph(), retain, o)
	if err != nil {
		return nil, err
	}
	if err := p.RunGuarded(); err != nil {
		return nil, err
	}
	res := &arenaResult{stats: p.Stats(), program: p, compared: len(retain)}
	for i, n := range retain {
		got := lab.Floats(p.Value(n))
		if len(got) != len(want[i]) {
			return nil, fmt.Errorf("%v: %d values from the arena, %d from the TapeMachine", n, len(got), len(want[i]))
		}
		for j := range got {
			d := float64(got[j]) - float64(want[i][j])
			res.diff = max(res.diff, d, -d)
		}
	}
	if !train {
		return res, nil
	}
	for _, donate := range []bool{true, false} {
		u, err := planUpdate(ctx, p, m, donate, o)
		if err != nil {
			return nil, err
		}
		res.updates = append(res.updates, u)
	}
	tape := timeSteps(steps, func() error { _, err := m.Step(idx, tgt); return err })
	am, err := models.NewModel(mc, params, mc.Batch, mc.Block, true, models.WithArena(o))
	if err != nil {
		return nil, err
	}
	defer am.Close()
	fast := timeSteps(steps, func() error { _, err := am.Step(idx, tgt); return err })
	for _, s := range []*speedRow{&tape, &fast} {
		if s.executor != "" {
			return nil, errors.New(s.executor)
		}
	}
	tape.executor, fast.executor = "TapeMachine", "arena"
	res.speed = []speedRow{tape, fast}
	return res, nil
}

// warmSteps is how many untimed steps come first: the first binds the
// kernels; the next let the pool's workers and their scratch reach the
// concurrency the step has (on two cores one warm step left about one
// allocation in three quick runs inside the timed steps).
const warmSteps = 3

// timeSteps runs step n times (after warmSteps untimed steps) and returns
// the median time and the heap allocations per step; an error is returned
// in executor.
func timeSteps(n int, step func() error) speedRow {
	for range warmSteps {
		if err := step(); err != nil {
			return speedRow{executor: err.Error()}
		}
	}
	var before, after runtime.MemStats
	times := make([]float64, n)
	runtime.ReadMemStats(&before)
	for i := range times {
		t0 := time.Now()
		if err := step(); err != nil {
			return speedRow{executor: err.Error()}
		}
		times[i] = float64(time.Since(t0).Microseconds()) / 1000
	}
	runtime.ReadMemStats(&after)
	return speedRow{
		stepMS: lab.Median(times),
		allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}
}

// planUpdate extends the training step's lifetimes with the optimizer:
// every parameter enters as a program input (donated or not), and after
// the backward pass one AdamW op per parameter reads it and its gradient
// and asks to write the new value over it. The planner judges each
// request; the legal ones merge the old and new parameter into one value.
func planUpdate(ctx context.Context, p *arena.Program, m *models.Model, donate bool, o arena.Options) (updateRow, error) {
	steps := p.Lifetimes()
	var prog planner.Program
	params, grads := m.ParamNodes(), m.GradNodes()
	gradName := map[string]bool{}
	for i, pn := range params {
		name := p.ValueName(pn)
		prog.Ops = append(prog.Ops, planner.Op{Fn: "param", Out: name, Size: 4 * int64(pn.Shape().TotalSize())})
		prog.Inputs = append(prog.Inputs, name)
		if donate {
			prog.Donated = append(prog.Donated, name)
		}
		gradName[p.ValueName(grads[i])] = true
	}
	prog.Ops = append(prog.Ops, steps.Ops...)
	for _, out := range steps.Outputs {
		if !gradName[out] { // a gradient now dies at its update
			prog.Outputs = append(prog.Outputs, out)
		}
	}
	u := updateRow{params: len(params), donated: donate, refusal: "-"}
	for i, pn := range params {
		name := p.ValueName(pn)
		prog.Ops = append(prog.Ops, planner.Op{Fn: "adamw", Out: name + "'", Size: 4 * int64(pn.Shape().TotalSize()),
			In: []string{name, p.ValueName(grads[i])}})
		prog.Outputs = append(prog.Outputs, name+"'")
	}
	for i := len(prog.Ops) - len(params); i < len(prog.Ops); i++ {
		in := prog.Ops[i].In[0]
		if err := prog.Legal(i, in); err != nil {
			var ref *planner.Refusal
			if !errors.As(err, &ref) {
				return u, err
			}
			if u.refusal == "-" {
				u.refusal = ref.Reason
			}
			continue
		}
		prog.Ops[i].InPlace = in
		u.legal++
	}
	prob, _, err := prog.Problem(o.Alignment)
	if err != nil {
		return u, err
	}
	plan, err := o.Algorithm.Run(ctx, prob)
	if err != nil {
		return u, err
	}
	u.arena, u.bound = plan.Peak, prob.Bound()
	return u, nil
}

// matrixChain runs the chapter's chain of matrix products from the arena
// and naively, and reports both and the memory saved.
func matrixChain(ctx context.Context, r *reports.Report) error {
	dims := []int{256, 192, 320, 128, 384, 160, 256, 224}
	g, out := arena.Chain(dims, 1)
	vm := G.NewTapeMachine(g)
	defer vm.Close()
	if err := vm.RunAll(); err != nil {
		return err
	}
	want := out.Value().Data().([]float64)
	g2, out2 := arena.Chain(dims, 1)
	algo, err := planner.Lookup("greedy-by-size")
	if err != nil {
		return err
	}
	p, err := arena.Compile(ctx, g2, G.Nodes{out2}, arena.Options{Algorithm: algo})
	if err != nil {
		return err
	}
	if err := p.RunGuarded(); err != nil {
		return err
	}
	got := p.Value(out2).Data().([]float64)
	same := len(got) == len(want)
	for i := range want {
		same = same && got[i] == want[i]
	}
	st := p.Stats()
	t := r.AddTable(fmt.Sprintf("Matrix chain of %d products (%v), float64", len(dims)-2, dims),
		reports.Text("run"), reports.Bytes("intermediates"), reports.Text("result"))
	t.Row("naive (TapeMachine)", st.NaiveBytes, "reference")
	t.Row("arena", st.ArenaBytes, map[bool]string{true: "bitwise equal", false: "DIFFERS"}[same])
	t.Row("lower bound", st.BoundBytes, "-")
	r.Check("matrix chain from the arena equals the naive run", same, "%d values", len(want))
	r.Check("matrix chain arena smaller than naive", st.ArenaBytes < st.NaiveBytes,
		"arena %d bytes, naive %d bytes (%.0f%% saved)", st.ArenaBytes, st.NaiveBytes, 100*(1-lab.Ratio(st.ArenaBytes, st.NaiveBytes)))
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
