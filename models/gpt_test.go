package models

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/testutil"
	"gptlab/models/ops"
)

func tinyModel(t testing.TB, dropout float64, train bool) (*Model, Config) {
	t.Helper()
	cfg, _ := Preset("tiny")
	cfg.Dropout = dropout
	m, err := NewModel(cfg, NewParams(cfg, 3), cfg.Batch, cfg.Block, train)
	if err != nil {
		t.Fatal(err)
	}
	return m, cfg
}

// A model must read the batch of each Step, not the one it was first run
// with: a model that saw batch A and then B equals a fresh one on B.
func TestStepReadsEachBatch(t *testing.T) {
	m, cfg := tinyModel(t, 0, true)
	a1, a2 := randomBatch(cfg, cfg.Batch, cfg.Block, 1)
	b1, b2 := randomBatch(cfg, cfg.Batch, cfg.Block, 2)
	lossA, err := m.Step(a1, a2)
	if err != nil {
		t.Fatal(err)
	}
	lossB, err := m.Step(b1, b2)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := tinyModel(t, 0, true)
	want, err := fresh.Step(b1, b2)
	if err != nil {
		t.Fatal(err)
	}
	if lossB != want || lossA == lossB {
		t.Errorf("losses A %v, B %v after A; fresh model on B %v: want B equal to fresh and unlike A", lossA, lossB, want)
	}
	name := "transformer.h.1.attn.c_attn.weight"
	if d := testutil.MaxAbsDiff(m.Grad(name), fresh.Grad(name)); d != 0 {
		t.Errorf("grad %s differs from a fresh model's by %g", name, d)
	}
}

// An evaluation model has the same logits as a training model and no
// gradients; its loss without targets is 0.
func TestEvalModel(t *testing.T) {
	tr, cfg := tinyModel(t, 0, true)
	ev, _ := tinyModel(t, 0, false)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 4)
	lt, err := tr.Step(idx, tgt)
	if err != nil {
		t.Fatal(err)
	}
	le, err := ev.Step(idx, tgt)
	if err != nil {
		t.Fatal(err)
	}
	if lt != le || testutil.MaxAbsDiff(tr.Logits(), ev.Logits()) != 0 {
		t.Errorf("eval loss %v vs train %v, logits differ by %g", le, lt, testutil.MaxAbsDiff(tr.Logits(), ev.Logits()))
	}
	if ev.Grad("transformer.wte.weight") != nil {
		t.Errorf("an evaluation model returned a gradient")
	}
	if l, err := ev.Step(idx, nil); err != nil || l != 0 {
		t.Errorf("eval Step without targets = %v, %v, want 0, nil", l, err)
	}
	if _, err := tr.Step(idx, nil); !errors.Is(err, ErrTokens) {
		t.Errorf("training Step without targets: %v, want ErrTokens", err)
	}
}

// Logits at position t depend only on tokens 0..t (the causal mask).
func TestCausality(t *testing.T) {
	m, cfg := tinyModel(t, 0, false)
	idx, _ := randomBatch(cfg, cfg.Batch, cfg.Block, 5)
	if _, err := m.Step(idx, nil); err != nil {
		t.Fatal(err)
	}
	before := append([]float32(nil), m.Logits()...)
	const pos = 9
	idx[pos] = (idx[pos] + 1) % int32(cfg.Vocab) // sequence 0, position 9
	if _, err := m.Step(idx, nil); err != nil {
		t.Fatal(err)
	}
	V := cfg.Vocab
	if d := testutil.MaxAbsDiff(before[:pos*V], m.Logits()[:pos*V]); d != 0 {
		t.Errorf("changing token %d changed earlier logits by %g", pos, d)
	}
	if d := testutil.MaxAbsDiff(before[pos*V:(pos+1)*V], m.Logits()[pos*V:(pos+1)*V]); d == 0 {
		t.Errorf("changing token %d left its own logits unchanged", pos)
	}
}

func TestStepRejectsBadTokens(t *testing.T) {
	m, cfg := tinyModel(t, 0, true)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 1)
	for _, tc := range []struct {
		name     string
		idx, tgt []int32
		want     string
	}{
		{"short", idx[:3], tgt, "has 3 tokens"},
		{"out of vocab", append([]int32{65}, idx[1:]...), tgt, "idx[0] = 65"},
		{"negative target", idx, append([]int32{-1}, tgt[1:]...), "targets[0] = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Step(tc.idx, tc.tgt); !errors.Is(err, ErrTokens) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Step = %v, want ErrTokens mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := NewModel(cfg, NewParams(cfg, 1), 1, cfg.Block+1, true); !errors.Is(err, ErrConfig) {
		t.Errorf("NewModel with T > block: %v, want ErrConfig", err)
	}
}

// dropoutSites lists the Dropout nodes of m's graph: their sites and the
// shapes they multiply.
func dropoutSites(m *Model) (sites []ops.DropoutSite, shapes []tensor.Shape) {
	for _, n := range m.Graph().AllNodes() {
		if s, ok := ops.DropoutSiteOf(n.Op()); ok {
			sites, shapes = append(sites, s), append(shapes, n.Shape())
		}
	}
	return sites, shapes
}

func TestDropout(t *testing.T) {
	plain, cfg := tinyModel(t, 0, true)
	if s, _ := dropoutSites(plain); len(plain.masks)+len(s) != 0 {
		t.Errorf("dropout 0 built %d mask inputs and %d dropout ops, want none", len(plain.masks), len(s))
	}
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 6)
	l0, _ := plain.Step(idx, tgt)

	d, _ := tinyModel(t, 0.2, true)
	if len(d.masks) != 0 {
		t.Errorf("stateless dropout built %d mask inputs, want none (drawn in the kernels)", len(d.masks))
	}
	d.SetDropoutSeed(9)
	d.SetDropoutKey(4)
	l1, _ := d.Step(idx, tgt)
	if d.DropoutKey() != 5 {
		t.Errorf("DropoutKey after a step = %d, want 5", d.DropoutKey())
	}
	l2, _ := d.Step(idx, tgt) // step 5: other masks
	d.SetDropoutKey(4)
	l3, _ := d.Step(idx, tgt) // step 4 again: the same masks
	if l1 != l3 || l1 == l2 || l1 == l0 {
		t.Errorf("losses: no dropout %v; key 4 %v, key 5 %v, key 4 again %v: want key 4 reproducible and unlike the others", l0, l1, l2, l3)
	}
	// an evaluation model never drops.
	ev, _ := tinyModel(t, 0.2, false)
	s, _ := dropoutSites(ev)
	if le, _ := ev.Step(idx, tgt); le != l0 || len(ev.masks)+len(s) != 0 {
		t.Errorf("eval loss with dropout 0.2 = %v, want the no-dropout %v", le, l0)
	}
}

// Example_trainStep runs one forward/backward pass and one AdamW update.
func Example_trainStep() {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
	if err != nil {
		panic(err)
	}
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 1)
	opt := NewAdamW(p, DefaultAdamW())
	first, _ := m.Step(idx, tgt)
	for i := 0; i < 20; i++ {
		m.Step(idx, tgt)
		opt.Step(m, 0)
	}
	last, _ := m.Step(idx, tgt)
	fmt.Printf("initial loss near log(65) = %.2f: %v\n", math.Log(65), math.Abs(float64(first)-math.Log(65)) < 0.05)
	fmt.Println("loss falls on a repeated batch:", last < first-0.5)
	fmt.Println(len(m.Logits()) == cfg.Batch*cfg.Block*cfg.Vocab, len(m.Grad("transformer.wte.weight")) == 65*32)
	// Output:
	// initial loss near log(65) = 4.17: true
	// loss falls on a repeated batch: true
	// true true
}

// With dropout, the gradient is the derivative of the loss under the same
// masks: a central difference of the loss along the gradient direction,
// with the dropout key held fixed, equals the gradient's norm. Holding the
// key is what makes it hold (the negative control lets the key move).
func TestDropoutGradientDirectional(t *testing.T) {
	m, cfg := tinyModel(t, 0.3, true)
	p := m.Params()
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 8)
	const key = 7
	m.SetDropoutKey(key)
	if _, err := m.Step(idx, tgt); err != nil {
		t.Fatal(err)
	}
	g := make([]float64, p.Count())
	for _, n := range p.Names() {
		off := p.Offset(n)
		for j, v := range m.Grad(n) {
			g[off+j] = float64(v)
		}
	}
	var norm float64
	for _, v := range g {
		norm += v * v
	}
	norm = math.Sqrt(norm)
	orig := append([]float32(nil), p.Data()...)
	lossAt := func(eps float64, k int64) float64 {
		for i := range orig {
			p.Data()[i] = orig[i] + float32(eps*g[i]/norm)
		}
		m.SetDropoutKey(k)
		l, err := m.Step(idx, tgt)
		if err != nil {
			t.Fatal(err)
		}
		return float64(l)
	}
	const eps = 1e-2
	fd := (lossAt(eps, key) - lossAt(-eps, key)) / (2 * eps)
	moved := (lossAt(eps, key+1) - lossAt(-eps, key+2)) / (2 * eps)
	copy(p.Data(), orig)
	t.Logf("gradient norm %.6g, directional difference %.6g, with moved masks %.6g", norm, fd, moved)
	if math.Abs(fd-norm) > 0.01*norm {
		t.Errorf("directional difference %.5g, gradient norm %.5g: want them within 1%%", fd, norm)
	}
	if math.Abs(moved-norm) < 0.01*norm {
		t.Errorf("negative control: with other masks the difference %.5g still matches %.5g", moved, norm)
	}
}

// The masks a Step uses are ops.DropoutMask's for (seed, step, layer,
// site), over the documented shapes: every site of the graph is there
// once in the forward and once in its gradient, keyed by the model's key,
// and each Dropout node's output (the TapeMachine keeps them all) is its
// input times that mask, bit for bit.
func TestDropoutMasksRegenerate(t *testing.T) {
	cfg, _ := Preset("tiny")
	cfg.Dropout = 0.1
	m, err := NewModel(cfg, NewParams(cfg, 3), cfg.Batch, cfg.Block, true, WithTapeMachine())
	if err != nil {
		t.Fatal(err)
	}
	m.SetDropoutSeed(5)
	m.SetDropoutKey(11)
	idx, tgt := randomBatch(cfg, cfg.Batch, cfg.Block, 2)
	if _, err := m.Step(idx, tgt); err != nil {
		t.Fatal(err)
	}
	N, C, H, T := cfg.Batch*cfg.Block, cfg.Embd, cfg.Heads, cfg.Block
	size := map[int]int{SiteEmbed: N * C, SiteAttn: cfg.Batch * H * T * T, SiteAttnResid: N * C, SiteMLP: N * C}
	seen := map[[2]int]int{}
	checked := 0
	for _, n := range m.Graph().AllNodes() {
		s, ok := ops.DropoutSiteOf(n.Op())
		if !ok {
			continue
		}
		seen[[2]int{s.Layer, s.Site}]++
		if s.P != cfg.Dropout || n.Shape().TotalSize() != size[s.Site] {
			t.Errorf("dropout (layer %d, site %d): p %v over %v, want p %v over %d values", s.Layer, s.Site, s.P, n.Shape(), cfg.Dropout, size[s.Site])
		}
		if s.Key.Seed != 5 || s.Key.Step != 12 { // Step advanced the key after its run
			t.Errorf("dropout (layer %d, site %d) keyed %+v, want the model's key (5, 12)", s.Layer, s.Site, *s.Key)
		}
		in := m.Graph().From(n.ID())
		in.Next()
		x := f32Of(in.Node().(*G.Node).Value())
		y := f32Of(n.Value())
		mask := make([]float32, len(x))
		ops.DropoutMask(mask, cfg.Dropout, 5, 11, s.Layer, s.Site)
		for i := range x {
			if math.Float32bits(y[i]) != math.Float32bits(x[i]*mask[i]) {
				t.Fatalf("dropout (layer %d, site %d): element %d is %v, want %v·%v", s.Layer, s.Site, i, y[i], x[i], mask[i])
			}
		}
		checked++
	}
	if want := 1 + 3*cfg.Layers; len(seen) != want || checked != 2*want {
		t.Errorf("%d sites in %d dropout ops, want %d sites, each in the forward and the backward", len(seen), checked, want)
	}
}
