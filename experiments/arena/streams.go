package arena

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	G "gorgonia.org/gorgonia"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/planner/arena"
	"gptlab/reports"
)

// The training step on two streams. The stream scheduler (planner's
// AssignStreams) assigns the step's ops to two streams on the
// checkpointing cost model's costs (models.DefaultCost; an op with the
// machine to itself streamSplit times faster than on one core), so the
// assignment, and the arena planned for it, are the same on every run and
// every machine. The lab plans the arena by happens-before (planner's
// streams.go), checks the plan against the order and by simulated
// interleavings, shows that the plan made for one stream would race, and
// runs the step both ways: bitwise the one-stream step, in the time
// measured. Beside it, the scheduler on the ops' measured costs and the
// faster of its streams and one, both timings.

// streamSplit is the cost model's gain of an op split across the two
// cores over one core: what the second core bought the baby step's
// products on the AVX-512 machines measured (1.6-1.8); on a machine whose
// two vCPUs share a core's load ports it is nearer 1.3.
const streamSplit = 1.6

// streamsResult is what one config's two-stream step measured.
type streamsResult struct {
	ops, stream1        int
	arenaOne, arenaTwo  int64
	boundTwo            int64
	verified            error  // Verify of the two-stream plan: the interval checks, VerifyOrder, SimulateStreams
	race                string // VerifyOrder's refusal of the one-stream plan on two streams, or ""
	bitwise             bool
	compared            int
	modelOne, modelTwo  float64 // the cost model's makespans (seconds)
	oneMS, twoMS        float64 // medians of interleaved steps
	autoOps, autoChosen int     // the scheduler's streams, by measurement: ops on stream 1, streams kept
}

// streamSync is the cost model's price of a wait for the other stream.
const streamSync = 2e-6

// streamsCase trains nothing: it runs the config's training step (forward
// and backward) on one stream and on two, on one batch, steps times each,
// interleaved.
func streamsCase(ctx context.Context, mc models.Config, seed int64, steps int, o arena.Options) (*streamsResult, error) {
	params := models.NewParams(mc, seed)
	m, err := models.NewModel(mc, params, mc.Batch, mc.Block, true, models.WithArena(o))
	if err != nil {
		return nil, err
	}
	defer m.Close()
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	idx := make([]int32, mc.Batch*mc.Block)
	tgt := make([]int32, len(idx))
	for i := range idx {
		idx[i], tgt[i] = int32(rng.IntN(mc.Vocab)), int32(rng.IntN(mc.Vocab))
	}
	outs := append(G.Nodes{m.LossNode(), m.LogitsNode()}, m.GradNodes()...)
	p := m.Arena()
	snapshot := func() [][]float32 {
		s := make([][]float32, len(outs))
		for i, n := range outs {
			s[i] = slices.Clone(lab.Floats(p.Value(n)))
		}
		return s
	}
	if _, err := m.Step(idx, tgt); err != nil {
		return nil, err
	}
	want := snapshot()
	res := &streamsResult{ops: p.Steps(), compared: len(outs), arenaOne: p.Stats().ArenaBytes}
	costs, err := m.StreamCosts(models.DefaultCost, streamSplit)
	if err != nil {
		return nil, err
	}
	a, err := p.Lifetimes().AssignStreams(costs, streamSync)
	if err != nil {
		return nil, err
	}
	two := a.Streams
	for _, s := range two {
		res.stream1 += s
	}
	res.modelOne, res.modelTwo = a.OneStream, a.TwoStreams
	if err := p.SetStreams(ctx, two); err != nil {
		return nil, err
	}
	st := p.Stats()
	res.arenaTwo, res.boundTwo = st.ArenaBytes, st.BoundBytes
	res.verified = p.Verify()
	// The same program planned as if on one stream: its in-place writes
	// and values as they are, only the streams forgotten.
	prog := p.Lifetimes()
	one := prog
	one.Ops = slices.Clone(prog.Ops)
	for i := range one.Ops {
		one.Ops[i].Stream = 0
	}
	prob, _, err := one.Problem(o.Alignment)
	if err != nil {
		return nil, err
	}
	plan, err := o.Algorithm.Run(ctx, prob)
	if err != nil {
		return nil, err
	}
	if err := prog.VerifyOrder(prob, plan); err != nil {
		res.race = err.Error()
	}
	res.bitwise = true
	var times [2][]float64
	for range steps {
		for k, streams := range [][]int{two, nil} {
			if err := p.SetStreams(ctx, streams); err != nil {
				return nil, err
			}
			for warm := range 2 { // the first step after planning touches a new arena
				t0 := time.Now()
				if _, err := m.Step(idx, tgt); err != nil {
					return nil, err
				}
				if warm == 1 {
					times[k] = append(times[k], float64(time.Since(t0).Microseconds())/1000)
				}
				for i, w := range snapshot() {
					res.bitwise = res.bitwise && slices.Equal(w, want[i])
				}
			}
		}
	}
	res.twoMS, res.oneMS = lab.Median(times[0]), lab.Median(times[1])
	// The scheduler's streams, from the ops' measured costs, kept where
	// measured faster: a timing, as everything it chose.
	c, err := p.ChooseStreams(ctx, steps)
	if err != nil {
		return nil, err
	}
	res.autoOps, res.autoChosen = c.Steps[1], c.Chosen
	return res, nil
}

// addStreams reports the two-stream step of every training config.
func addStreams(r *reports.Report, t *reports.Table, name string, s *streamsResult) {
	raced := "no race found"
	if s.race != "" {
		raced = "races"
	}
	t.Row(name, s.ops, s.stream1, s.modelTwo/s.modelOne, s.arenaOne, s.arenaTwo, lab.Ratio(s.arenaTwo, s.arenaOne), raced,
		map[bool]string{true: "yes", false: "NO"}[s.bitwise], s.oneMS, s.twoMS, s.autoOps, s.autoChosen)
	r.Metric(name+"_two_stream_arena_bytes", s.arenaTwo)
	r.Metric(name+"_stream1_ops", s.stream1)
	detail := "the interval sweep, the byte-pattern simulation, every pair of buffers sharing bytes ordered by happens-before, " +
		fmt.Sprintf("and the ops under %d simulated interleavings of the streams", arena.SimulatedInterleavings)
	if s.verified != nil {
		detail = s.verified.Error()
	}
	r.Check(name+" training on two streams: the plan holds by happens-before", s.verified == nil, "%s", detail)
	r.Check(name+" training on two streams: bitwise the one-stream step", s.bitwise,
		"%d outputs (loss, logits, every gradient) over the interleaved steps", s.compared)
	r.Check(name+" training on two streams: the one-stream plan races (the order check can fail)", s.race != "",
		"%s", map[bool]string{true: s.race, false: "the plan made for one stream passed VerifyOrder on two: nothing shows the check can refuse"}[s.race != ""])
}

// streamsTable is the table addStreams fills.
func streamsTable(r *reports.Report, steps int) *reports.Table {
	return r.AddTable(fmt.Sprintf("The training step on two streams assigned by the cost model (median of %d interleaved steps)", steps),
		reports.Text("config"), reports.Int("ops"), reports.Int("on stream 1"), reports.Ratio("model 2 / 1"), reports.Bytes("arena, 1 stream"),
		reports.Bytes("arena, 2"), reports.Ratio("2 / 1"), reports.Text("1-stream plan"), reports.Text("bitwise"),
		reports.Float("1 stream (ms)", 2), reports.Float("2 streams (ms)", 2), reports.Int("scheduler: on 1 (timed)"),
		reports.Int("kept (timed)"))
}
