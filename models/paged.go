package models

import (
	"fmt"
	"math"

	"gptlab/internal/vec"
	"gptlab/models/ops"
)

// paged.go: the GPT's forward over a ragged batch against a paged KV
// cache, for a serving engine. The keys and values of every sequence live
// in a pool of fixed-size physical blocks (PagedKV); a sequence reaches its
// own through a block table, logical block j holding positions [j*size,
// (j+1)*size). One Forward runs any mix of prefill chunks and decode
// tokens of sequences of different lengths: their rows are stacked into
// one (ΣN, C) matrix, so every linear layer is one matrix product over all
// of them, and only attention looks at which sequence a row belongs to.
//
// The layers are those of layers.go, term for term (embedding, LayerNorm,
// c_attn, causal softmax attention, c_proj, GELU MLP, the tied head) on
// the same kernels (ops' rows, internal/vec, the matrix products below),
// without a graph: a serving step's rows change every iteration, and a
// compiled graph per shape would cost more than the step. The tests hold
// every position's logits to a full forward of the same tokens (1e-5).

// PagedKV is the pool of KV blocks: per layer, K and V (Blocks, H,
// BlockSize, hs), so one head's keys in one block are contiguous. Blocks
// are addressed by their index; which sequence owns a block is the
// caller's business (a block manager's).
type PagedKV struct {
	cfg              Config
	BlockSize, Count int
	k, v             [][]float32 // per layer: (Count, H, BlockSize, hs)
}

// NewPagedKV makes a pool of count blocks of blockSize token slots for
// cfg's shape.
func NewPagedKV(cfg Config, blockSize, count int) (*PagedKV, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if blockSize < 1 || count < 1 {
		return nil, fmt.Errorf("%w: paged KV of %d blocks of %d tokens, want both >= 1", ErrConfig, count, blockSize)
	}
	n := count * blockSize * cfg.Embd
	kv := &PagedKV{cfg: cfg, BlockSize: blockSize, Count: count}
	for range cfg.Layers {
		kv.k = append(kv.k, make([]float32, n))
		kv.v = append(kv.v, make([]float32, n))
	}
	return kv, nil
}

// Bytes is the pool's storage: keys and values of every layer.
func (kv *PagedKV) Bytes() int64 { return 2 * int64(len(kv.k)) * int64(len(kv.k[0])) * 4 }

// Copy copies the KV of the first tokens slots of block src into block
// dst, in every layer and head (copy on write, swap out and in).
func (kv *PagedKV) Copy(src, dst, tokens int) error {
	if src < 0 || src >= kv.Count || dst < 0 || dst >= kv.Count || tokens < 0 || tokens > kv.BlockSize {
		return fmt.Errorf("%w: copy of %d slots from block %d to %d in a pool of %d blocks of %d", ErrTokens, tokens, src, dst, kv.Count, kv.BlockSize)
	}
	hs, bs := kv.cfg.HeadSize(), kv.BlockSize
	for l := range kv.k {
		for h := range kv.cfg.Heads {
			s, d := (src*kv.cfg.Heads+h)*bs*hs, (dst*kv.cfg.Heads+h)*bs*hs
			copy(kv.k[l][d:d+tokens*hs], kv.k[l][s:s+tokens*hs])
			copy(kv.v[l][d:d+tokens*hs], kv.v[l][s:s+tokens*hs])
		}
	}
	return nil
}

// slot is the offset of (head h, position pos) of a table in a layer's K
// or V.
func (kv *PagedKV) slot(table []int32, h, pos int) int {
	bs, hs := kv.BlockSize, kv.cfg.HeadSize()
	return ((int(table[pos/bs])*kv.cfg.Heads+h)*bs + pos%bs) * hs
}

// PagedEntry is one sequence's work in a ragged step: its tokens at
// positions Start … Start+len(Tokens)-1, whose keys and values are written
// into the slots Table maps them to, each attending to positions 0 … its
// own (the earlier ones must already be in the pool).
type PagedEntry struct {
	Tokens []int32
	Start  int
	Table  []int32 // physical block of each logical block, covering Start+len(Tokens) positions
	Logits bool    // return the logits after the last token
}

// PagedModel runs the GPT's forward of ragged batches against a PagedKV.
// Its weights are laid out once for inference (linear.go's packing); it
// is not safe for concurrent use.
type PagedModel struct {
	cfg Config
	p   *Params
	kv  *PagedKV
	lin pagedLinears
	// scratch, grown to the largest batch seen
	x, h, qkv, y, t, f []float32
	scores             []float32
	rows               []int
	hsel, logits       []float32
}

// NewPagedModel makes the paged forward of p over the pool kv.
func NewPagedModel(p *Params, kv *PagedKV) (*PagedModel, error) {
	cfg := p.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if kc := kv.cfg; kc.Vocab != cfg.Vocab || kc.Block != cfg.Block || kc.Layers != cfg.Layers || kc.Heads != cfg.Heads || kc.Embd != cfg.Embd {
		return nil, fmt.Errorf("%w: paged KV made for %+v, params for %+v", ErrConfig, kc, cfg)
	}
	m := &PagedModel{cfg: cfg, p: p, kv: kv, scores: make([]float32, cfg.Block)}
	m.lin = newPagedLinears(p)
	return m, nil
}

// Config is the model's configuration.
func (m *PagedModel) Config() Config { return m.cfg }

// KV is the pool the model reads and writes.
func (m *PagedModel) KV() *PagedKV { return m.kv }

// Forward runs the entries and returns the logits (R, V) after the last
// token of each entry with Logits set, in entry order; the slice belongs
// to the model and changes at the next call.
func (m *PagedModel) Forward(entries []PagedEntry) ([]float32, error) {
	return m.forward(entries, false)
}

// ForwardAll is Forward returning the logits of every token (ΣN, V): the
// tests' view of every position.
func (m *PagedModel) ForwardAll(entries []PagedEntry) ([]float32, error) {
	return m.forward(entries, true)
}

// check validates the entries and returns their rows.
func (m *PagedModel) check(entries []PagedEntry) (int, error) {
	N := 0
	for i := range entries {
		e := &entries[i]
		n := len(e.Tokens)
		if n == 0 || e.Start < 0 || e.Start+n > m.cfg.Block {
			return 0, fmt.Errorf("%w: entry %d: %d tokens at position %d, want at least 1 within the block of %d", ErrTokens, i, n, e.Start, m.cfg.Block)
		}
		if need := (e.Start + n + m.kv.BlockSize - 1) / m.kv.BlockSize; len(e.Table) < need {
			return 0, fmt.Errorf("%w: entry %d: table of %d blocks for %d positions of %d per block", ErrTokens, i, len(e.Table), e.Start+n, m.kv.BlockSize)
		}
		for _, b := range e.Table {
			if b < 0 || int(b) >= m.kv.Count {
				return 0, fmt.Errorf("%w: entry %d: block %d outside the pool of %d", ErrTokens, i, b, m.kv.Count)
			}
		}
		for _, t := range e.Tokens {
			if t < 0 || int(t) >= m.cfg.Vocab {
				return 0, fmt.Errorf("%w: entry %d: token %d outside the vocabulary [0, %d)", ErrTokens, i, t, m.cfg.Vocab)
			}
		}
		N += n
	}
	return N, nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func (m *PagedModel) forward(entries []PagedEntry, all bool) ([]float32, error) {
	N, err := m.check(entries)
	if err != nil {
		return nil, err
	}
	C, V := m.cfg.Embd, m.cfg.Vocab
	m.x, m.h, m.y, m.t = grow(m.x, N*C), grow(m.h, N*C), grow(m.y, N*C), grow(m.t, N*C)
	m.qkv, m.f = grow(m.qkv, 3*N*C), grow(m.f, 4*N*C)
	wte, wpe := m.p.Slice("transformer.wte.weight"), m.p.Slice("transformer.wpe.weight")
	r := 0
	for i := range entries {
		e := &entries[i]
		for j, tok := range e.Tokens {
			pos := e.Start + j
			vec.Add(m.x[r*C:(r+1)*C], wte[int(tok)*C:(int(tok)+1)*C], wpe[pos*C:(pos+1)*C]) // (C)
			r++
		}
	}
	for l := range m.cfg.Layers {
		L := &m.lin.layers[l]
		ops.LayerNormRows(m.h, m.x, L.ln1w, L.ln1b) // (N, C)
		L.attn.apply(m.qkv, m.h, N)                 // (N, 3C)
		m.attend(entries, l)                        // (N, C) into y
		L.proj.apply(m.t, m.y, N)                   // (N, C)
		vec.Add(m.x, m.x, m.t)
		ops.LayerNormRows(m.h, m.x, L.ln2w, L.ln2b) // (N, C)
		L.fc.apply(m.f, m.h, N)                     // (N, 4C)
		ops.GELURows(m.f, m.f)
		L.mproj.apply(m.t, m.f, N) // (N, C)
		vec.Add(m.x, m.x, m.t)
	}
	m.rows = m.rows[:0]
	r = 0
	for i := range entries {
		n := len(entries[i].Tokens)
		switch {
		case all:
			for j := range n {
				m.rows = append(m.rows, r+j)
			}
		case entries[i].Logits:
			m.rows = append(m.rows, r+n-1)
		}
		r += n
	}
	R := len(m.rows)
	m.hsel, m.logits = grow(m.hsel, R*C), grow(m.logits, R*V)
	for k, row := range m.rows {
		copy(m.hsel[k*C:(k+1)*C], m.x[row*C:(row+1)*C])
	}
	ops.LayerNormRows(m.hsel, m.hsel, m.lin.lnfw, m.lin.lnfb) // (R, C)
	m.lin.head.apply(m.logits, m.hsel, R)                     // (R, V)
	return m.logits, nil
}

// attend writes each row's keys and values of layer l into the pool and
// its attention over the positions up to its own into m.y (N, C):
// softmax(q·kᵀ/√hs)·v per head, as CausalSoftmax and CausalApply compute.
func (m *PagedModel) attend(entries []PagedEntry, l int) {
	C, H, hs := m.cfg.Embd, m.cfg.Heads, m.cfg.HeadSize()
	K, Vv := m.kv.k[l], m.kv.v[l]
	sc := float32(1 / math.Sqrt(float64(hs)))
	r0 := 0
	for i := range entries {
		e := &entries[i]
		n := len(e.Tokens)
		for j := range n { // every row's K and V first: a prefill's rows read each other's
			row := m.qkv[(r0+j)*3*C : (r0+j+1)*3*C]
			for h := range H {
				o := m.kv.slot(e.Table, h, e.Start+j)
				copy(K[o:o+hs], row[C+h*hs:C+(h+1)*hs])
				copy(Vv[o:o+hs], row[2*C+h*hs:2*C+(h+1)*hs])
			}
		}
		for j := range n {
			pos := e.Start + j
			q := m.qkv[(r0+j)*3*C : (r0+j+1)*3*C]
			y := m.y[(r0+j)*C : (r0+j+1)*C]
			for h := range H {
				qh := q[h*hs : (h+1)*hs]
				s := m.scores[:pos+1]
				for p := range s {
					o := m.kv.slot(e.Table, h, p)
					s[p] = dot32(qh, K[o:o+hs])
				}
				ops.SoftmaxPrefix(s, s, pos+1, sc)
				yh := y[h*hs : (h+1)*hs]
				clear(yh)
				for p, w := range s {
					o := m.kv.slot(e.Table, h, p)
					axpy32(yh, w, Vv[o:o+hs])
				}
			}
		}
		r0 += n
	}
}

// dot32 is Σ a·b over len(a) in float32, four partial sums.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy32 is y += a·x.
func axpy32(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}
