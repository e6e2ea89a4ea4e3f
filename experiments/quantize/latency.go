package quantize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/tensor"

	"gptlab/experiments/lab"
	"gptlab/internal/qgemm"
	"gptlab/internal/vec"
	"gptlab/models"
)

// timing is a latency's median and 95th percentile, and its runs in the
// order they ran (nil for PyTorch's, which reports only the two): the
// rounds of the timed checks.
type timing struct {
	p50, p95 time.Duration
	runs     []time.Duration
}

// quantiles is the timing of the runs ts (as torch_infer.py computes it).
func quantiles(ts []time.Duration) timing {
	sorted := slices.Sorted(slices.Values(ts))
	return timing{sorted[len(sorted)/2], sorted[min(len(sorted)-1, int(0.95*float64(len(sorted))))], ts}
}

// timeRuns runs f a tenth of runs (at least 10) untimed, then runs times,
// and returns the p50 and p95 (as torch_infer.py computes them).
func timeRuns(runs int, f func() error) (timing, error) {
	for range max(10, runs/10) {
		if err := f(); err != nil {
			return timing{}, err
		}
	}
	ts := make([]time.Duration, runs)
	for i := range ts {
		t0 := time.Now()
		if err := f(); err != nil {
			return timing{}, err
		}
		ts[i] = time.Since(t0)
	}
	return quantiles(ts), nil
}

// Our three ways to multiply, in the order of every [3]timing.
const (
	pathF32 = iota
	pathWeightOnly
	pathDynamic
)

var pathNames = [...]string{"f32", "weight-only", "dynamic"}

// layerLat is one linear layer shape at one M.
type layerLat struct {
	layer   string
	in, out int
	M       int
	ours    [3]timing
	errs    [3]float64 // weight-only and dynamic outputs against float32 on the dequantized weights, normwise
	torch   *[2]timing // PyTorch's f32 and int8, or nil
}

// best is our faster int8 kernel's path and timing (by p50).
func (l *layerLat) best() (int, timing) { return bestOf(l.ours) }

func bestOf(t [3]timing) (int, timing) {
	if t[pathDynamic].p50 < t[pathWeightOnly].p50 {
		return pathDynamic, t[pathDynamic]
	}
	return pathWeightOnly, t[pathWeightOnly]
}

// latencySet is the latency of one config.
type latencySet struct {
	name     string
	cfg      models.Config
	random   bool // random weights (the large config)
	threads  int
	runs     int
	layers   []*layerLat
	forward  [3]timing
	decode   [3]timing
	torchFwd *[2]timing
	torchErr error // why PyTorch did not run, or nil
	engine   string
}

// layerShapes are a block's linear layers as [out, in] of a config.
func layerShapes(C int) []struct {
	name    string
	out, in int
} {
	return []struct {
		name    string
		out, in int
	}{{"attn.c_attn", 3 * C, C}, {"attn.c_proj", C, C}, {"mlp.c_fc", 4 * C, C}, {"mlp.c_proj", C, 4 * C}}
}

// latency times every linear layer shape of layer 0 of p at M=1 and
// M=64, the whole forward at B=1 over the block, and one decode step
// from the KV cache, in float32 and on both int8 kernels of q.
func (ql *quantizeLab) latency(ctx context.Context, name string, p *models.Params, q *models.Quantized) (*latencySet, error) {
	mc := p.Config()
	s := &latencySet{name: name, cfg: mc, random: name == "large", threads: ql.cfg.Threads, runs: ql.cfg.Runs,
		torchErr: errors.New("not run (--set torch=false)")}
	rng := rand.New(rand.NewPCG(uint64(ql.opt.Seed), 0x6c6174)) // "lat"
	impl := tensor.WhichBLAS()
	for _, sh := range layerShapes(mc.Embd) {
		full := "transformer.h.0." + sh.name
		w, b := p.Slice(full+".weight"), p.Slice(full+".bias")
		t := q.Tensor(full + ".weight")
		packed := t.Packed()
		deq := t.Dequantize()
		for _, M := range []int{1, 64} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			x := make([]float32, M*sh.in)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			ys := [3][]float32{make([]float32, M*sh.out), make([]float32, M*sh.out), make([]float32, M*sh.out)}
			mul := [3]func(){
				func() {
					impl.Sgemm(blas.NoTrans, blas.Trans, M, sh.out, sh.in, 1, x, sh.in, w, sh.in, 0, ys[0], sh.out)
				},
				func() { qgemm.WeightOnly(ys[1], x, M, packed) },
				func() { qgemm.Dynamic(ys[2], x, M, packed) },
			}
			l := &layerLat{layer: sh.name, in: sh.in, out: sh.out, M: M}
			for k, f := range mul {
				y := ys[k]
				var err error
				if l.ours[k], err = timeRuns(s.runs, func() error { f(); addBias(y, b); return nil }); err != nil {
					return nil, err
				}
			}
			ref := make([]float32, M*sh.out) // float32 on the dequantized weights
			impl.Sgemm(blas.NoTrans, blas.Trans, M, sh.out, sh.in, 1, x, sh.in, deq, sh.in, 0, ref, sh.out)
			addBias(ref, b)
			for k := pathWeightOnly; k <= pathDynamic; k++ {
				l.errs[k] = relDiff(ys[k], ref)
			}
			s.layers = append(s.layers, l)
		}
	}
	opts := [3][]models.ModelOption{nil, {models.WithInt8(q, models.Int8WeightOnly)}, {models.WithInt8(q, models.Int8Dynamic)}}
	params := [3]*models.Params{p, q.Params(), q.Params()}
	idx := make([]int32, mc.Block)
	for i := range idx {
		idx[i] = int32(rng.IntN(mc.Vocab))
	}
	for k := range opts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := models.NewModel(mc, params[k], 1, mc.Block, false, opts[k]...)
		if err != nil {
			return nil, err
		}
		s.forward[k], err = timeRuns(s.runs, func() error { _, err := m.Step(idx, nil); return err })
		m.Close()
		if err != nil {
			return nil, err
		}
		d, err := models.NewDecoder(params[k], 1, opts[k]...)
		if err != nil {
			return nil, err
		}
		s.decode[k], err = timeDecode(s.runs, d, idx)
		d.Close()
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// timeDecode times one decode step at position Block-1: each run
// prefills the first Block-1 tokens (untimed) and times the last one.
func timeDecode(runs int, d *models.Decoder, idx []int32) (timing, error) {
	pre, last := idx[:len(idx)-1], idx[len(idx)-1:]
	ts := make([]time.Duration, 0, runs)
	for i := range runs + max(10, runs/10) {
		d.Reset()
		if _, err := d.Append(pre); err != nil {
			return timing{}, err
		}
		t0 := time.Now()
		if _, err := d.Append(last); err != nil {
			return timing{}, err
		}
		if i >= max(10, runs/10) {
			ts = append(ts, time.Since(t0))
		}
	}
	return quantiles(ts), nil
}

// addBias adds the bias b to every row of y, as the model's bias op does
// (vec.AddRow).
func addBias(y, b []float32) { vec.AddRow(y, y, b) }

// torchRow is one JSON line of torch_infer.py int8.
type torchRow struct {
	Layer  string  `json:"layer"`
	M      int     `json:"M"`
	Engine string  `json:"engine"`
	F32p50 float64 `json:"f32_p50_us"`
	F32p95 float64 `json:"f32_p95_us"`
	I8p50  float64 `json:"int8_p50_us"`
	I8p95  float64 `json:"int8_p95_us"`
}

func us(x float64) time.Duration { return time.Duration(x * float64(time.Microsecond)) }

// torchRows runs PyTorch's f32 nn.Linear and its dynamic int8 on the
// set's shapes and forward, on as many threads, and fills their columns;
// where it cannot run, torchErr says why.
func (s *latencySet) torchRows(ctx context.Context) {
	mc := s.cfg
	args := []string{"int8", "--vocab", strconv.Itoa(mc.Vocab), "--block", strconv.Itoa(mc.Block), "--layers", strconv.Itoa(mc.Layers),
		"--heads", strconv.Itoa(mc.Heads), "--embd", strconv.Itoa(mc.Embd), "--threads", strconv.Itoa(s.threads), "--runs", strconv.Itoa(s.runs)}
	lines, err := lab.RunPeer(ctx, "torch_infer.py", args...)
	s.torchErr = err
	if err != nil {
		return
	}
	for _, ln := range lines {
		var r torchRow
		if err := json.Unmarshal(ln, &r); err != nil {
			s.torchErr = fmt.Errorf("torch_infer.py: %w", err)
			return
		}
		t := &[2]timing{{p50: us(r.F32p50), p95: us(r.F32p95)}, {p50: us(r.I8p50), p95: us(r.I8p95)}}
		s.engine = r.Engine
		if r.Layer == "forward" {
			s.torchFwd = t
			continue
		}
		for _, l := range s.layers {
			if l.layer == r.Layer && l.M == r.M {
				l.torch = t
			}
		}
	}
	for _, l := range s.layers {
		if l.torch == nil {
			s.torchErr = fmt.Errorf("torch_infer.py printed no row for %s at M=%d", l.layer, l.M)
		}
	}
	if s.torchFwd == nil && s.torchErr == nil {
		s.torchErr = fmt.Errorf("torch_infer.py printed no forward row")
	}
}
