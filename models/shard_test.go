package models

import (
	"math"
	"slices"
	"testing"

	"gptlab/internal/testutil"
)

// tpBlock runs one block split over size shards in this process (the
// sums the all-reduces would make, made here), forward and backward from
// dx2, and returns the output, the input's gradient and every block
// parameter's gradient in the model's layout.
func tpBlock(t testing.TB, cfg Config, p *Params, layer, size int, x, dx2 []float32) (x2, dx []float32, grads map[string][]float32) {
	t.Helper()
	B, T, C := cfg.Batch, cfg.Block, cfg.Embd
	N := B * T
	shards := make([]*BlockShard, size)
	for r := range shards {
		s, err := NewBlockShard(cfg, p, layer, r, size, B, T)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		shards[r] = s
	}
	pre := "transformer.h." + string(rune('0'+layer)) + "."
	sum := func(f func(s *BlockShard) ([]float32, error)) []float32 {
		out := make([]float32, N*C)
		for _, s := range shards {
			part, err := f(s)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range part {
				out[i] += v
			}
		}
		return out
	}
	addBiasResid := func(z, res []float32, bias string) []float32 {
		b := p.Slice(pre + bias)
		out := make([]float32, len(z))
		for i := range z {
			out[i] = res[i] + (z[i] + b[i%C])
		}
		return out
	}
	h := slices.Clone(must(shards[0].LN1.Forward(x)))
	x1 := addBiasResid(sum(func(s *BlockShard) ([]float32, error) { return s.Attn.Forward(h) }), x, "attn.c_proj.bias")
	h2 := slices.Clone(must(shards[0].LN2.Forward(x1)))
	x2 = addBiasResid(sum(func(s *BlockShard) ([]float32, error) { return s.MLP.Forward(h2) }), x1, "mlp.c_proj.bias")

	grads = map[string][]float32{}
	colsum := func(d []float32) []float32 { // in float64, as ColSum sums
		acc := make([]float64, C)
		for i, v := range d {
			acc[i%C] += float64(v)
		}
		out := make([]float32, C)
		for i, v := range acc {
			out[i] = float32(v)
		}
		return out
	}
	grads[pre+"mlp.c_proj.bias"] = colsum(dx2)
	dh2 := sum(func(s *BlockShard) ([]float32, error) { return s.MLP.Backward(h2, dx2) })
	dx1 := slices.Clone(must(shards[0].LN2.Backward(x1, dh2)))
	for i := range dx1 {
		dx1[i] += dx2[i]
	}
	grads[pre+"attn.c_proj.bias"] = colsum(dx1)
	dh := sum(func(s *BlockShard) ([]float32, error) { return s.Attn.Backward(h, dx1) })
	dx = slices.Clone(must(shards[0].LN1.Backward(x, dh)))
	for i := range dx {
		dx[i] += dx1[i]
	}
	for _, s := range shards {
		for _, part := range []*ShardPart{s.LN1, s.Attn, s.LN2, s.MLP} {
			if (part == s.LN1 || part == s.LN2) && s.Rank != 0 {
				continue // replicated: every rank computes the same
			}
			for _, name := range part.Params() {
				model, starts, width, err := s.ParamSlices(part, name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if grads[model] == nil {
					grads[model] = make([]float32, len(p.Slice(model)))
				}
				g := part.Grad(name)
				for i, at := range starts {
					copy(grads[model][at:at+width], g[i*width:(i+1)*width])
				}
			}
		}
	}
	return x2, dx, grads
}

func must(v []float32, err error) []float32 {
	if err != nil {
		panic(err)
	}
	return v
}

// relDiff is ‖a − b‖₂ / ‖b‖₂.
func relDiff(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		d += (float64(a[i]) - float64(b[i])) * (float64(a[i]) - float64(b[i]))
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// blockCase is block 1 of small inside the GPT: its input and the
// gradient the loss sends back to its output (units of the chain, run
// forward and backward down to it).
func blockCase(t testing.TB, cfg Config, p *Params) (x, dy []float32) {
	t.Helper()
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 3)
	chain := Chain(cfg)
	xs := make([][]float32, len(chain))
	var out []float32
	units := make([]*Unit, len(chain))
	for i, seg := range chain {
		u, err := NewUnit(cfg, p, seg, cfg.Batch, cfg.Block)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if err := u.SetTokens(idx, tgt); err != nil {
			t.Fatal(err)
		}
		units[i] = u
		xs[i] = slices.Clone(out)
		out = must(u.Forward(xs[i]))
	}
	for i := len(units) - 1; i > 4; i-- { // down to the output of mlp 1
		dy = slices.Clone(must(units[i].Backward(xs[i], dy)))
	}
	return slices.Clone(xs[3]), dy
}

// TestBlockShardsComposeToTheBlock: a block split Megatron-style over 2
// and 4 shards, their partial outputs and input gradients summed, gives
// the unsplit block's output, input gradient and every parameter's
// gradient (the units of the same block) within 1e-6 relative, on the
// gradient the loss sends back.
func TestBlockShardsComposeToTheBlock(t *testing.T) {
	cfg, _ := Preset("small")
	p := NewParams(cfg, 5)
	x, dx2 := blockCase(t, cfg, p)
	attn, err := NewUnit(cfg, p, Segment{Kind: SegAttn, Layer: 1}, cfg.Batch, cfg.Block)
	if err != nil {
		t.Fatal(err)
	}
	defer attn.Close()
	mlp, err := NewUnit(cfg, p, Segment{Kind: SegMLP, Layer: 1}, cfg.Batch, cfg.Block)
	if err != nil {
		t.Fatal(err)
	}
	defer mlp.Close()
	x1 := slices.Clone(must(attn.Forward(x)))
	want := slices.Clone(must(mlp.Forward(x1)))
	dx1 := slices.Clone(must(mlp.Backward(x1, dx2)))
	wantDX := slices.Clone(must(attn.Backward(x, dx1)))
	sizes := []int{2, 4}
	if testutil.Trimmed() { // emulated -short: 2 shards, not also 4 (natively both)
		sizes = sizes[:1]
	}
	for _, size := range sizes {
		got, gotDX, grads := tpBlock(t, cfg, p, 1, size, x, dx2)
		worst := max(relDiff(got, want), relDiff(gotDX, wantDX))
		names := append(attn.Params(), mlp.Params()...)
		for _, name := range names {
			u := attn
			if !slices.Contains(attn.Params(), name) {
				u = mlp
			}
			d := relDiff(grads[name], u.Grad(name, make([]float32, len(p.Slice(name)))))
			if !(d <= 1e-6) {
				t.Errorf("%d shards: gradient of %s differs by %g relative", size, name, d)
			}
			worst = max(worst, d)
		}
		if !(worst <= 1e-6) || len(grads) != len(names) {
			t.Errorf("%d shards: largest relative difference %g, %d gradients of %d", size, worst, len(grads), len(names))
		}
		t.Logf("%d shards: largest relative difference %g", size, worst)
	}
	if _, err := NewBlockShard(cfg, p, 1, 0, 3, cfg.Batch, cfg.Block); err == nil {
		t.Error("4 heads over 3 ranks: no error")
	}
}
