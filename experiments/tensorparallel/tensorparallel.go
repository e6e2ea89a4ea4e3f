package tensorparallel

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	G "gorgonia.org/gorgonia"

	"gptlab/experiments/lab"
	"gptlab/models"
	"gptlab/parallel"
	"gptlab/planner/arena"
	"gptlab/reports"
)

// The tensor-parallel lab splits one linear layer, and then a whole GPT
// block Megatron-style, across the ranks of a job of real processes, and
// checks every output and gradient against the unsplit computation rank 0
// runs itself. Bytes of the block's collectives are counted against
// Megatron's model of them.

type tensorParallelConfig struct {
	Ranks     int    `set:"ranks" help:"processes (2 or 4: the heads must divide among them)"`
	Transport string `set:"transport" help:"auto (shared memory on one host), shm, tcp, or mpi (under mpirun)"`
	Config    string `set:"config" help:"GPT preset whose block is split: tiny, small or baby"`
	Layer     int    `set:"layer" help:"the block split (its input and upstream gradient come from the whole GPT)"`
	Rows      int    `set:"rows" help:"rows of the linear layer's input"`
	In        int    `set:"in" help:"input features of the linear layer"`
	Out       int    `set:"out" help:"output features of the linear layer"`
}

var tensorParallelDefaults = tensorParallelConfig{Ranks: 2, Transport: "auto", Config: "small", Layer: 1, Rows: 256, In: 192, Out: 256}

// Lab is the tensor-parallel lab.
var Lab = lab.New("tensor-parallel", "column/row-split linear layers and a Megatron block across processes",
	tensorParallelDefaults, func(c *tensorParallelConfig) { c.Config, c.Layer, c.Rows = "tiny", 1, 64 }, runTensorParallel)

func (c *tensorParallelConfig) validate() (models.Config, error) {
	mc, err := models.Preset(c.Config)
	switch {
	case err != nil:
		return mc, lab.Usagef("--set config=%s: unknown preset (want tiny, small or baby)", c.Config)
	case c.Ranks < 2 || c.Ranks > 8:
		return mc, lab.Usagef("--set ranks=%d: want 2 to 8", c.Ranks)
	case mc.Heads%c.Ranks != 0:
		return mc, lab.Usagef("--set ranks=%d: %s's %d heads do not split over %d ranks", c.Ranks, c.Config, mc.Heads, c.Ranks)
	case c.Layer < 0 || c.Layer >= mc.Layers:
		return mc, lab.Usagef("--set layer=%d: %s has layers 0 to %d", c.Layer, c.Config, mc.Layers-1)
	case c.Rows < 1 || c.Rows > 1<<14 || c.In < c.Ranks || c.In > 1<<14 || c.Out < c.Ranks || c.Out > 1<<14:
		return mc, lab.Usagef("--set rows=%d in=%d out=%d: want 1 to 16384 rows and ranks to 16384 features", c.Rows, c.In, c.Out)
	case c.In%c.Ranks != 0 || c.Out%c.Ranks != 0:
		return mc, lab.Usagef("--set in=%d out=%d: both must divide by ranks=%d", c.In, c.Out, c.Ranks)
	case !slices.Contains([]string{"auto", "shm", "tcp", "mpi"}, c.Transport):
		return mc, lab.Usagef("--set transport=%s: want auto, shm, tcp or mpi", c.Transport)
	case parallel.CheckTransport(c.Transport) != nil: // shm where the system has none (Windows)
		return mc, lab.Usagef("--set transport=%s: %v", c.Transport, parallel.CheckTransport(c.Transport))
	}
	return mc, nil
}

func runTensorParallel(ctx context.Context, cfg *tensorParallelConfig, opt lab.Options) (*reports.Report, error) {
	mc, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	return lab.OnRanks(ctx, "tensor-parallel", cfg, opt, cfg.Ranks, cfg.Transport, func(ctx context.Context, c *parallel.Comm) (*reports.Report, error) {
		if c.Size() != cfg.Ranks {
			return nil, lab.Usagef("tensor-parallel: the job has %d ranks, --set ranks=%d", c.Size(), cfg.Ranks)
		}
		r := reports.New("tensor-parallel", "Tensor parallelism: split layers, summed partials, counted bytes")
		if err := tpLinear(r, c, cfg, opt.Seed); err != nil {
			return nil, err
		}
		if err := tpBlock(r, c, mc, cfg, opt.Seed); err != nil {
			return nil, err
		}
		r.Note("%d processes over %s exchange real bytes; every figure compared is rank 0's against the unsplit "+
			"computation it runs itself. Relative differences are ‖split − unsplit‖₂ / ‖unsplit‖₂, per tensor. "+
			"CPU processes teach the algebra and the bytes; nothing here is a claim about GPU scaling.", c.Size(), c.Transport())
		return r, nil
	})
}

// linearRun is one linear layer's forward and backward from one graph:
// y = x·wᵀ (+ b), and the gradients of x, w and b for an upstream dy.
type linearRun struct{ y, dx, dw, db []float32 }

// linear runs x (n, in) · w (out, in)ᵀ (+ b when b is not nil) and its
// backward from dy (n, out) with the project's ops and Backward.
func linear(x, w, b, dy []float32, n, in, out int) (linearRun, error) {
	g := G.NewGraph()
	node := func(name string, d []float32, s ...int) *G.Node {
		return G.NewTensor(g, G.Float32, len(s), G.WithShape(s...), G.WithName(name), G.WithValue(denseOf(d, s...)))
	}
	xn, wn := node("x", x, n, in), node("w", w, out, in)
	y, err := arena.MatMul(xn, wn, false, true) // (n, out)
	if err != nil {
		return linearRun{}, err
	}
	wrt := G.Nodes{xn, wn}
	if b != nil {
		bn := node("b", b, out)
		if y, err = models.AddBias(y, bn); err != nil {
			return linearRun{}, err
		}
		wrt = append(wrt, bn)
	}
	gs, err := models.Backward(G.Nodes{y}, G.Nodes{node("dy", dy, n, out)}, wrt)
	if err != nil {
		return linearRun{}, err
	}
	p, err := arena.Compile(context.Background(), g, append(G.Nodes{y}, gs...), arena.Options{})
	if err != nil {
		return linearRun{}, err
	}
	if err := p.Run(); err != nil {
		return linearRun{}, err
	}
	f := func(nd *G.Node) []float32 { return slices.Clone(lab.Floats(p.Value(nd))) }
	lr := linearRun{y: f(y), dx: f(gs[0]), dw: f(gs[1])}
	if b != nil {
		lr.db = f(gs[2])
	}
	return lr, nil
}

// columns is columns [lo, hi) of a row-major (rows, cols) matrix.
func columns(m []float32, rows, cols, lo, hi int) []float32 {
	out := make([]float32, 0, rows*(hi-lo))
	for r := range rows {
		out = append(out, m[r*cols+lo:r*cols+hi]...)
	}
	return out
}

// gatherColumns all-gathers each rank's (rows, w) block of columns into
// the (rows, p·w) matrix they make side by side.
func gatherColumns(c *parallel.Comm, block []float32, rows, w int) ([]float32, error) {
	p := c.Size()
	buf := make([]float32, p*rows*w) // rank i's block at segment i
	lo, _ := parallel.Segment(len(buf), p, c.Rank())
	copy(buf[lo:], block)
	if err := c.AllGather(buf); err != nil {
		return nil, err
	}
	out := make([]float32, p*rows*w)
	for i := range p {
		for r := range rows {
			copy(out[r*p*w+i*w:r*p*w+(i+1)*w], buf[i*rows*w+r*w:i*rows*w+(r+1)*w])
		}
	}
	return out, nil
}

// tpLinear splits Y = X·Wᵀ + b by output columns (each rank computes its
// columns; the pieces are gathered) and by input rows (each rank a partial
// product of its share of the inputs; the partials are summed by an
// all-reduce and the bias added once), and checks both against the
// unsplit layer, with the bias added on every rank as the negative control.
func tpLinear(r *reports.Report, c *parallel.Comm, cfg *tensorParallelConfig, seed int64) error {
	n, in, out, p, rank := cfg.Rows, cfg.In, cfg.Out, c.Size(), c.Rank()
	rng := rand.New(rand.NewPCG(uint64(seed), 21)) // the same on every rank
	fill := func(k int, s float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * s)
		}
		return v
	}
	x, w, b, dy := fill(n*in, 1), fill(out*in, 1/math.Sqrt(float64(in))), fill(out, 0.5), fill(n*out, 0.1)
	ref, err := linear(x, w, b, dy, n, in, out)
	if err != nil {
		return err
	}
	t := r.AddTable(fmt.Sprintf("One linear layer, Y = X·Wᵀ + b: X (%d, %d), W (%d, %d), split over %d ranks", n, in, out, in, p),
		reports.Text("split"), reports.Significant("Y", 2), reports.Significant("dX", 2), reports.Significant("dW", 2),
		reports.Significant("db", 2), reports.Text("collectives"))
	t.Note("Relative differences to the unsplit layer, rank 0's. Column: each rank its out/P rows of W and of b; " +
		"Y's columns all-gathered, dX's partials all-reduced. Row: each rank its in/P columns of W and of X; Y's " +
		"partials all-reduced and b added once after the sum, dX's columns all-gathered.")

	// By output columns.
	o0, o1 := rank*out/p, (rank+1)*out/p
	col, err := linear(x, w[o0*in:o1*in], b[o0:o1], columns(dy, n, out, o0, o1), n, in, o1-o0)
	if err != nil {
		return err
	}
	y, err := gatherColumns(c, col.y, n, o1-o0)
	if err != nil {
		return err
	}
	dx := slices.Clone(col.dx)
	if err := c.AllReduce(dx); err != nil {
		return err
	}
	dw := make([]float32, out*in) // rank i's rows are its segment: W's rows are contiguous
	copy(dw[o0*in:], col.dw)
	if err := c.AllGather(dw); err != nil {
		return err
	}
	db := make([]float32, out)
	copy(db[o0:], col.db)
	if err := c.AllGather(db); err != nil {
		return err
	}
	colDiff := []float64{lab.RelDiff(y, ref.y), lab.RelDiff(dx, ref.dx), lab.RelDiff(dw, ref.dw), lab.RelDiff(db, ref.db)}
	t.Row("by output columns", colDiff[0], colDiff[1], colDiff[2], colDiff[3], "all-gather Y; all-reduce dX")

	// By input rows.
	i0, i1 := rank*in/p, (rank+1)*in/p
	xr, wr := columns(x, n, in, i0, i1), columns(w, out, in, i0, i1)
	part, err := linear(xr, wr, nil, dy, n, i1-i0, out)
	if err != nil {
		return err
	}
	yr := slices.Clone(part.y)
	over := slices.Clone(part.y) // the negative control: the bias added on every rank, before the sum
	for j := range over {
		over[j] += b[j%out]
	}
	if err := c.AllReduce(yr); err != nil {
		return err
	}
	if err := c.AllReduce(over); err != nil {
		return err
	}
	for j := range yr {
		yr[j] += b[j%out]
	}
	dxr, err := gatherColumns(c, part.dx, n, i1-i0)
	if err != nil {
		return err
	}
	dwr, err := gatherColumns(c, part.dw, out, i1-i0)
	if err != nil {
		return err
	}
	rowDiff := []float64{lab.RelDiff(yr, ref.y), lab.RelDiff(dxr, ref.dx), lab.RelDiff(dwr, ref.dw), lab.RelDiff(colSum(dy, out), ref.db)}
	t.Row("by input rows", rowDiff[0], rowDiff[1], rowDiff[2], rowDiff[3], "all-reduce Y; all-gather dX")
	overDiff := lab.RelDiff(over, ref.y)
	t.Note("With the bias added on every rank before the all-reduce, Y holds %d·b: %.3g relative off (the negative control).", p, overDiff)
	worst := func(ds []float64) float64 { return slices.Max(ds) }
	r.Check("the linear layer split by output columns equals the unsplit one", worst(colDiff) <= 1e-6,
		"largest relative difference %.3g (Y, dX, dW, db)", worst(colDiff))
	r.Check("the linear layer split by input rows equals the unsplit one", worst(rowDiff) <= 1e-6,
		"largest relative difference %.3g (Y, dX, dW, db)", worst(rowDiff))
	r.Check("negative control: the bias added on every rank overcounts", overDiff > 1e-3,
		"Y off by %.3g relative: it holds %d·b", overDiff, p)
	r.Metric("max_rel_diff_linear_column", worst(colDiff))
	r.Metric("max_rel_diff_linear_row", worst(rowDiff))
	r.Metric("bias_overcount_rel_diff", overDiff)
	return nil
}

// colSum is the column sums of a row-major (·, cols) matrix, in float64.
func colSum(m []float32, cols int) []float32 {
	acc := make([]float64, cols)
	for i, v := range m {
		acc[i%cols] += float64(v)
	}
	out := make([]float32, cols)
	for i, v := range acc {
		out[i] = float32(v)
	}
	return out
}
