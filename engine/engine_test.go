package engine

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/serving"
)

// fixture is a model, a tokenizer of its vocabulary, and requests of
// random prompts and lengths.
type fixture struct {
	p   *models.Params
	tok *models.Tokenizer
	cfg models.Config
}

func newFixture(t testing.TB, preset string) *fixture {
	t.Helper()
	cfg, err := models.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	var chars strings.Builder
	for r := range cfg.Vocab {
		chars.WriteRune(rune(' ' + r))
	}
	tok, err := models.TokenizerFromChars(chars.String())
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{p: models.NewParams(cfg, 11), tok: tok, cfg: cfg}
}

// requests draws n requests with prompts of 1..maxPrompt tokens and
// outputs that fill up to the context window.
func (f *fixture) requests(n, maxPrompt int, seed uint64, sc models.SampleConfig) []Request {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []Request
	for range n {
		P := 1 + rng.IntN(maxPrompt)
		r := Request{MaxTokens: 1 + rng.IntN(f.cfg.Block-P), Sample: sc}
		for range P {
			r.Prompt = append(r.Prompt, int32(rng.IntN(f.cfg.Vocab)))
		}
		out = append(out, r)
	}
	return out
}

// reference decodes a request alone, unpaged: models.Sampler.Generate
// (its KV-cached Decoder path), as `gptlab gpt sample` does.
func (f *fixture) reference(t testing.TB, r Request) []int32 {
	return f.referenceOf(t, r, f.p)
}

// referenceOf is reference for the model of p with opts (an int8 one).
func (f *fixture) referenceOf(t testing.TB, r Request, p *models.Params, opts ...models.ModelOption) []int32 {
	t.Helper()
	s, err := models.NewSampler(p, f.tok, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sc := r.Sample
	sc.Tokens = r.MaxTokens
	text, err := s.Generate(f.tok.Decode(r.Prompt), sc)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := f.tok.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// drain steps e until idle, failing after too many iterations.
func drain(t testing.TB, e *Engine) {
	t.Helper()
	for i := 0; !e.Idle(); i++ {
		if i > 100000 {
			t.Fatal("engine did not drain")
		}
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFree fails unless every device and host block is free or cached.
func checkFree(t testing.TB, e *Engine) {
	t.Helper()
	if err := e.blocks.Check(nil); err != nil {
		t.Fatal(err)
	}
	if u, h := e.blocks.Used(), e.blocks.HostUsed(); u != 0 || h != 0 {
		t.Fatalf("%d device and %d host blocks still used", u, h)
	}
}

func runAll(t *testing.T, f *fixture, cfg Config, reqs []Request) ([]*Handle, *Engine) {
	t.Helper()
	cfg.Check = true
	e, err := New(f.p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var hs []*Handle
	for _, r := range reqs {
		h, err := e.Add(r)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	drain(t, e)
	if e.Checks() != e.counts.iterations || e.Checks() == 0 {
		t.Fatalf("%d invariant checks over %d iterations", e.Checks(), e.counts.iterations)
	}
	checkFree(t, e)
	return hs, e
}

// TestGreedyEqualsAlone: every request's output, served in batches of
// mixed lengths (chunked prefills beside decodes), equals the same prompt
// decoded alone by models.Sampler; under seeded sampling too.
func TestGreedyEqualsAlone(t *testing.T) {
	f := newFixture(t, "small")
	chunky := Config{BlockSize: 8, Blocks: 64, Policy: "continuous", MaxSeqs: 6, MaxTokens: 13, Chunked: true}
	for _, tc := range []struct {
		name string
		cfg  Config
		sc   models.SampleConfig
	}{
		{"continuous greedy", chunky, models.SampleConfig{}},
		{"continuous sampled", chunky, models.SampleConfig{Temperature: 0.9, TopK: 20, TopP: 0.95, Seed: 5}},
		{"fixed greedy", Config{BlockSize: 16, Blocks: 40, Policy: "fixed", MaxSeqs: 4}, models.SampleConfig{}},
		{"caching greedy", Config{BlockSize: 4, Blocks: 200, Caching: true, Policy: "continuous", MaxSeqs: 8, MaxTokens: 64, Chunked: true}, models.SampleConfig{}},
		{"int8 dynamic greedy", Config{BlockSize: 8, Blocks: 64, Policy: "continuous", MaxSeqs: 6, MaxTokens: 13, Chunked: true, Weights: "int8", Int8Kernel: models.Int8Dynamic}, models.SampleConfig{}},
		{"int8 weight-only greedy", Config{BlockSize: 8, Blocks: 64, Policy: "continuous", MaxSeqs: 6, MaxTokens: 13, Chunked: true, Weights: "int8", Int8Kernel: models.Int8WeightOnly}, models.SampleConfig{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 10
			if testutil.Trimmed() { // emulated -short: 4 requests a policy, not 10
				n = 4
			}
			reqs := f.requests(n, 30, 7, tc.sc)
			hs, e := runAll(t, f, tc.cfg, reqs)
			p, opts := f.p, []models.ModelOption(nil)
			if tc.cfg.Weights == "int8" {
				q, err := models.Quantize(f.p, models.QuantizeOptions{Scheme: precision.Int8PerChannel})
				if err != nil {
					t.Fatal(err)
				}
				p, opts = q.Params(), []models.ModelOption{models.WithInt8(q, tc.cfg.Int8Kernel)}
			}
			for i, h := range hs {
				want := f.referenceOf(t, reqs[i], p, opts...)
				if !slices.Equal(h.Tokens(), want) {
					t.Fatalf("request %d: engine %v, alone %v", i, h.Tokens(), want)
				}
				if done, fin, err := h.Done(); !done || fin != FinishLength || err != nil {
					t.Fatalf("request %d: done %v, finish %q, %v", i, done, fin, err)
				}
			}
			if st := e.Scheduler().Stats(); tc.cfg.Policy == "continuous" && st.MaxRunning < 2 {
				t.Fatalf("never batched: %+v", st)
			}
		})
	}
}

// TestPreemptionEqualsUninterrupted forces preemptions with a tiny pool,
// by recompute and by swap, and compares with a roomy pool.
func TestPreemptionEqualsUninterrupted(t *testing.T) {
	f := newFixture(t, "small")
	reqs := f.requests(8, 20, 9, models.SampleConfig{})
	roomy, _ := runAll(t, f, Config{BlockSize: 8, Blocks: 128, Policy: "continuous", MaxSeqs: 8, MaxTokens: 64, Chunked: true}, reqs)
	for _, tc := range []struct {
		name string
		swap bool
	}{{"recompute", false}, {"swap", true}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{BlockSize: 8, Blocks: 12, Policy: "continuous", MaxSeqs: 8, MaxTokens: 64, Chunked: true, Swap: tc.swap}
			if tc.swap {
				cfg.HostBlocks = 24
			}
			hs, e := runAll(t, f, cfg, reqs)
			st := e.Scheduler().Stats()
			if st.Preemptions == 0 || (tc.swap && st.Swaps == 0) || (!tc.swap && st.Recomputed == 0) {
				t.Fatalf("the tiny pool forced no %s: %+v", tc.name, st)
			}
			for i, h := range hs {
				if !slices.Equal(h.Tokens(), roomy[i].Tokens()) {
					t.Fatalf("request %d: preempted %v, uninterrupted %v", i, h.Tokens(), roomy[i].Tokens())
				}
			}
			t.Logf("%d preemptions, %d swaps, %d tokens recomputed", st.Preemptions, st.Swaps, st.Recomputed)
		})
	}
}

// TestCancelInFlightFreesAtComplete cancels a request while its batch is
// in flight: its blocks stay until the batch completes, then are free.
func TestCancelInFlightFreesAtComplete(t *testing.T) {
	f := newFixture(t, "small")
	e, err := New(f.p, Config{BlockSize: 8, Blocks: 32, Policy: "continuous", MaxSeqs: 4, MaxTokens: 64, Chunked: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests(3, 20, 3, models.SampleConfig{})
	var hs []*Handle
	for _, r := range reqs {
		h, _ := e.Add(r)
		hs = append(hs, h)
	}
	for range 3 {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
	victim := hs[1]
	held := len(victim.Seq().Table)
	if held == 0 {
		t.Fatal("victim holds no blocks")
	}
	usedBefore := -1
	e.midStep = func() {
		usedBefore = e.blocks.Used()
		if !e.Cancel(victim, nil) {
			t.Error("cancel of a running request returned false")
		}
		if e.blocks.Used() != usedBefore {
			t.Error("blocks freed while the batch was in flight")
		}
	}
	if _, err := e.Step(); err != nil {
		t.Fatal(err)
	}
	e.midStep = nil
	if usedBefore < 0 {
		t.Fatal("the hook did not run")
	}
	if len(victim.Seq().Table) != 0 || victim.Seq().State != serving.Cancelled {
		t.Fatalf("victim after its batch: %d blocks, %s", len(victim.Seq().Table), victim.Seq().State)
	}
	others := 0
	for _, h := range hs {
		if h != victim {
			others += len(h.Seq().Table)
		}
	}
	if e.blocks.Used() != others {
		t.Fatalf("%d blocks used after the batch, the others map %d", e.blocks.Used(), others)
	}
	if _, fin, err := victim.Done(); fin != FinishCancelled || !errors.Is(err, ErrCancelled) {
		t.Fatalf("victim finished %q, %v", fin, err)
	}
	n := len(victim.Tokens())
	drain(t, e)
	if len(victim.Tokens()) != n {
		t.Fatal("a cancelled request kept generating")
	}
	checkFree(t, e)
}

// TestPrefixCachingComputesSharedOnce: requests sharing a prefix give the
// tokens they give without caching, and the shared blocks are computed
// once (prefill tokens run = all prompt tokens less the shared ones of
// every request after the first).
func TestPrefixCachingComputesSharedOnce(t *testing.T) {
	f := newFixture(t, "small")
	const bs, shared = 4, 24 // six full blocks of prefix
	rng := rand.New(rand.NewPCG(4, 4))
	prefix := make([]int32, shared)
	for i := range prefix {
		prefix[i] = int32(rng.IntN(f.cfg.Vocab))
	}
	var reqs []Request
	total := 0
	for i := range 5 {
		r := Request{Prompt: slices.Clone(prefix), MaxTokens: 10 + i}
		for range 1 + i {
			r.Prompt = append(r.Prompt, int32(rng.IntN(f.cfg.Vocab)))
		}
		total += len(r.Prompt)
		reqs = append(reqs, r)
	}
	outs := map[bool][][]int32{}
	for _, caching := range []bool{false, true} {
		e, err := New(f.p, Config{BlockSize: bs, Blocks: 128, Caching: caching, Policy: "continuous", MaxSeqs: 8, MaxTokens: 64, Chunked: true, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		first, _ := e.Add(reqs[0])
		for len(first.Tokens()) == 0 { // its prompt is computed and cached
			if _, err := e.Step(); err != nil {
				t.Fatal(err)
			}
		}
		hs := []*Handle{first}
		for _, r := range reqs[1:] {
			h, _ := e.Add(r)
			hs = append(hs, h)
		}
		drain(t, e)
		checkFree(t, e)
		for _, h := range hs {
			outs[caching] = append(outs[caching], slices.Clone(h.Tokens()))
		}
		want := int64(total)
		if caching {
			want -= int64((len(reqs) - 1) * shared)
		}
		if e.counts.prefillRun != want {
			t.Fatalf("caching %v: %d prefill tokens run, want %d", caching, e.counts.prefillRun, want)
		}
		if hit := e.blocks.Stats().HitTokens; caching && hit != int64((len(reqs)-1)*shared) {
			t.Fatalf("prefix cache hits %d tokens, want %d", hit, (len(reqs)-1)*shared)
		}
	}
	for i := range reqs {
		if !slices.Equal(outs[true][i], outs[false][i]) {
			t.Fatalf("request %d: with caching %v, without %v", i, outs[true][i], outs[false][i])
		}
	}
}

func TestValidate(t *testing.T) {
	f := newFixture(t, "tiny")
	e, err := New(f.p, Config{BlockSize: 4, Blocks: 8, Policy: "continuous", MaxSeqs: 2, MaxTokens: 16, Chunked: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r    Request
		want error
	}{
		{Request{MaxTokens: 1}, ErrRequest},
		{Request{Prompt: []int32{1}, MaxTokens: 0}, ErrRequest},
		{Request{Prompt: []int32{int32(f.cfg.Vocab)}, MaxTokens: 1}, ErrRequest},
		{Request{Prompt: make([]int32, 10), MaxTokens: 7}, ErrTooLong},
		{Request{Prompt: []int32{1}, MaxTokens: 2, Sample: models.SampleConfig{Temperature: -1}}, ErrRequest},
	} {
		if _, err := e.Add(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.r, err, tc.want)
		}
	}
	if _, err := e.Add(Request{Prompt: make([]int32, 10), MaxTokens: 6}); err != nil {
		t.Errorf("a request filling the window: %v", err)
	}
	for name, cfg := range map[string]Config{
		"pool too small": {BlockSize: 4, Blocks: 3, Policy: "continuous", MaxSeqs: 2, MaxTokens: 16, Chunked: true},
		"policy":         {BlockSize: 4, Blocks: 8, Policy: "lifo", MaxSeqs: 2},
		"unchunked":      {BlockSize: 4, Blocks: 8, Policy: "continuous", MaxSeqs: 2, MaxTokens: 8},
	} {
		if _, err := New(f.p, cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
