package tensorparallel

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"gorgonia.org/tensor"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/parallel"
	"gptlab/reports"
)

// denseOf is a tensor over d.
func denseOf(d []float32, shape ...int) *tensor.Dense {
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
}

// blockInputs runs the whole GPT (as the units of its chain) on a batch
// drawn from seed and returns block layer's input and the gradient the loss
// sends back to its output: what the block sees inside the model. Every
// rank computes the same.
func blockInputs(mc models.Config, p *models.Params, layer int, seed int64) (x, dy []float32, err error) {
	rng := rand.New(rand.NewPCG(uint64(seed), 23))
	n := mc.Batch * mc.Block
	idx, tgt := make([]int32, n), make([]int32, n)
	for i := range idx {
		idx[i], tgt[i] = int32(rng.IntN(mc.Vocab)), int32(rng.IntN(mc.Vocab))
	}
	chain := models.Chain(mc)
	units := make([]*models.Unit, len(chain))
	defer func() {
		for _, u := range units {
			if u != nil {
				u.Close()
			}
		}
	}()
	xs := make([][]float32, len(chain))
	var out []float32
	for i, seg := range chain {
		if units[i], err = models.NewUnit(mc, p, seg, mc.Batch, mc.Block); err != nil {
			return nil, nil, err
		}
		if err := units[i].SetTokens(idx, tgt); err != nil {
			return nil, nil, err
		}
		xs[i] = slices.Clone(out)
		if out, err = units[i].Forward(xs[i]); err != nil {
			return nil, nil, err
		}
	}
	last := 2 + 2*layer // the MLP half of the block
	for i := len(units) - 1; i > last; i-- {
		d, err := units[i].Backward(xs[i], dy)
		if err != nil {
			return nil, nil, err
		}
		dy = slices.Clone(d)
	}
	return slices.Clone(xs[last-1]), dy, nil
}

// blockResult is a block's output, input gradient and parameter gradients.
type blockResult struct {
	out, dx []float32
	grads   map[string][]float32
}

// unsplitBlock runs the block as the model does (its two half units).
func unsplitBlock(mc models.Config, p *models.Params, layer int, x, dy []float32) (blockResult, error) {
	res := blockResult{grads: map[string][]float32{}}
	var halves [2]*models.Unit
	for i, kind := range []models.SegmentKind{models.SegAttn, models.SegMLP} {
		u, err := models.NewUnit(mc, p, models.Segment{Kind: kind, Layer: layer}, mc.Batch, mc.Block)
		if err != nil {
			return res, err
		}
		defer u.Close()
		halves[i] = u
	}
	x1, err := halves[0].Forward(x)
	if err != nil {
		return res, err
	}
	x1 = slices.Clone(x1)
	out, err := halves[1].Forward(x1)
	if err != nil {
		return res, err
	}
	res.out = slices.Clone(out)
	dx1, err := halves[1].Backward(x1, dy)
	if err != nil {
		return res, err
	}
	dx1 = slices.Clone(dx1)
	dx, err := halves[0].Backward(x, dx1)
	if err != nil {
		return res, err
	}
	res.dx = slices.Clone(dx)
	for _, u := range halves {
		for _, name := range u.Params() {
			res.grads[name] = slices.Clone(u.Grad(name, make([]float32, len(p.Slice(name)))))
		}
	}
	return res, nil
}

// splitBlock runs this rank's shard of the block with the job's
// all-reduces: forward, the two partial outputs summed; backward, the two
// partial input gradients summed. It returns the block's result (every
// rank's gradients gathered, for the comparison) and what the block's own
// all-reduces moved.
func splitBlock(c *parallel.Comm, mc models.Config, p *models.Params, layer int, x, dy []float32) (blockResult, parallel.Counter, error) {
	res := blockResult{grads: map[string][]float32{}}
	s, err := models.NewBlockShard(mc, p, layer, c.Rank(), c.Size(), mc.Batch, mc.Block)
	if err != nil {
		return res, parallel.Counter{}, err
	}
	defer s.Close()
	C := mc.Embd
	pre := fmt.Sprintf("transformer.h.%d.", layer)
	allReduce := func(part []float32, err error) ([]float32, error) {
		if err != nil {
			return nil, err
		}
		buf := slices.Clone(part)
		return buf, c.AllReduce(buf)
	}
	biasResidual := func(z, res []float32, bias string) []float32 {
		b := p.Slice(pre + bias)
		out := make([]float32, len(z))
		for i := range z {
			out[i] = res[i] + (z[i] + b[i%C])
		}
		return out
	}
	before := c.Stats()
	h, err := s.LN1.Forward(x)
	if err != nil {
		return res, parallel.Counter{}, err
	}
	h = slices.Clone(h)
	z, err := allReduce(s.Attn.Forward(h)) // forward all-reduce 1
	if err != nil {
		return res, parallel.Counter{}, err
	}
	x1 := biasResidual(z, x, "attn.c_proj.bias")
	h2, err := s.LN2.Forward(x1)
	if err != nil {
		return res, parallel.Counter{}, err
	}
	h2 = slices.Clone(h2)
	z2, err := allReduce(s.MLP.Forward(h2)) // forward all-reduce 2
	if err != nil {
		return res, parallel.Counter{}, err
	}
	res.out = biasResidual(z2, x1, "mlp.c_proj.bias")
	res.grads[pre+"mlp.c_proj.bias"] = colSum(dy, C)
	dh2, err := allReduce(s.MLP.Backward(h2, dy)) // backward all-reduce 1
	if err != nil {
		return res, parallel.Counter{}, err
	}
	dx1, err := s.LN2.Backward(x1, dh2)
	if err != nil {
		return res, parallel.Counter{}, err
	}
	dx1 = slices.Clone(dx1)
	for i := range dx1 {
		dx1[i] += dy[i]
	}
	res.grads[pre+"attn.c_proj.bias"] = colSum(dx1, C)
	dh, err := allReduce(s.Attn.Backward(h, dx1)) // backward all-reduce 2
	if err != nil {
		return res, parallel.Counter{}, err
	}
	dx, err := s.LN1.Backward(x, dh)
	if err != nil {
		return res, parallel.Counter{}, err
	}
	res.dx = slices.Clone(dx)
	for i := range res.dx {
		res.dx[i] += dx1[i]
	}
	moved := c.Stats().Sub(before).Of(parallel.AllReduce)

	// Gather the shards' gradients into the model's layout (a verification
	// all-reduce, after the counted ones): each rank writes its slices,
	// the replicated LayerNorms rank 0 alone.
	for _, part := range []*models.ShardPart{s.LN1, s.Attn, s.LN2, s.MLP} {
		if (part == s.LN1 || part == s.LN2) && c.Rank() != 0 {
			for _, name := range part.Params() {
				model, _, _, err := s.ParamSlices(part, name, mc)
				if err != nil {
					return res, moved, err
				}
				if res.grads[model] == nil {
					res.grads[model] = make([]float32, len(p.Slice(model)))
				}
			}
			continue
		}
		g := part.Grad
		for _, name := range part.Params() {
			model, starts, width, err := s.ParamSlices(part, name, mc)
			if err != nil {
				return res, moved, err
			}
			if res.grads[model] == nil {
				res.grads[model] = make([]float32, len(p.Slice(model)))
			}
			for i, at := range starts {
				copy(res.grads[model][at:at+width], g(name)[i*width:(i+1)*width])
			}
		}
	}
	var names []string // in one order on every rank: collectives are matched by order
	for name := range res.grads {
		if name != pre+"mlp.c_proj.bias" && name != pre+"attn.c_proj.bias" { // computed whole on every rank
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := c.AllReduce(res.grads[name]); err != nil {
			return res, moved, err
		}
	}
	return res, moved, nil
}

// tpBlock splits block cfg.Layer of the GPT across the ranks and checks
// it against the unsplit block, and its bytes against Megatron's model.
func tpBlock(r *reports.Report, c *parallel.Comm, mc models.Config, cfg *tensorParallelConfig, seed int64) error {
	p := models.NewParams(mc, seed)
	x, dy, err := blockInputs(mc, p, cfg.Layer, seed)
	if err != nil {
		return err
	}
	got, moved, err := splitBlock(c, mc, p, cfg.Layer, x, dy)
	if err != nil {
		return err
	}
	want, err := unsplitBlock(mc, p, cfg.Layer, x, dy)
	if err != nil {
		return err
	}
	P := c.Size()
	t := r.AddTable(fmt.Sprintf("Block %d of %s split over %s (%s and %s each), against the unsplit block",
		cfg.Layer, cfg.Config, reports.Count(P, "rank"), reports.Count(mc.Heads/P, "head"), reports.Count(4*mc.Embd/P, "hidden unit")),
		reports.Text("tensor"), reports.Significant("relative difference", 2))
	worst := 0.0
	row := func(name string, a, b []float32) {
		d := lab.RelDiff(a, b)
		worst = max(worst, d)
		t.Row(name, d)
	}
	row("output", got.out, want.out)
	row("input gradient", got.dx, want.dx)
	var names []string
	for name := range want.grads {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return p.Offset(a) - p.Offset(b) })
	for _, name := range names {
		row("grad "+name, got.grads[name], want.grads[name])
	}
	r.Check("the Megatron block equals the unsplit block: output and every gradient", worst <= 1e-6 && len(got.grads) == len(want.grads),
		"largest relative difference %.3g over the output, the input gradient and %d parameter gradients", worst, len(names))
	r.Metric("max_rel_diff_block", worst)

	// Megatron's model: per layer, an all-reduce of the (B, T, C) activations
	// after each half forward and of their gradients backward; a ring
	// all-reduce sends 2(p-1)/p of the buffer. In all 8·b·s·h·(p-1)/p
	// elements a rank sends per layer.
	bsh := int64(mc.Batch * mc.Block * mc.Embd)
	model := 8 * float64(bsh) * float64(P-1) / float64(P) * 4
	b := r.AddTable("Bytes one rank sent for the block (forward and backward), against Megatron's model",
		reports.Text("collective"), reports.Int("calls"), reports.Bytes("sent"), reports.Bytes("model"), reports.Ratio("sent ÷ model"))
	b.Note("Model: 4 all-reduces a layer (two forward, two backward) of b·s·h = %d·%d·%d float32, each sending "+
		"2(p−1)/p of it around the ring: 8·b·s·h·(p−1)/p elements.", mc.Batch, mc.Block, mc.Embd)
	r.Metric("model_bytes_per_layer", int64(model))
	if c.Transport() == "mpi" { // OpenMPI moves the bytes itself: they are not ours to count
		b.Row("all-reduce", moved.Calls, nil, int64(model), nil)
		r.Note("Under MPI the all-reduces are OpenMPI's own, which moves the bytes itself: the bytes are counted on the shm and tcp transports.")
		return nil
	}
	b.Row("all-reduce", moved.Calls, moved.Sent, int64(model), float64(moved.Sent)/model)
	r.Check("the block's bytes match Megatron's model within 1%", moved.Calls == 4 && relErr(float64(moved.Sent), model) <= 0.01,
		"%d all-reduces, %s sent against %s", moved.Calls, reports.FormatBytes(float64(moved.Sent)), reports.FormatBytes(model))
	r.Metric("bytes_per_layer", moved.Sent)
	return nil
}

// relErr is |a - b| / b.
func relErr(a, b float64) float64 {
	if b == 0 {
		return a
	}
	d := (a - b) / b
	return max(d, -d)
}
