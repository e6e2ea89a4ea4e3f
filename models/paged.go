package models

import (
	"fmt"
	"math"

	"gptlab/internal/pgemm"
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

// PagedKV is the pool of KV blocks. Per layer and per (block, head), the
// keys are laid out as panels of internal/pgemm (the block's slots in
// groups of 32 columns, each hs rows of 32 values: Kᵀ), so one kernel call
// scores up to 32 slots against several queries; the values as panels of
// 32 head dimensions (BlockSize rows of 32 values: V), so one call sums a
// block's values weighted by its probabilities. Blocks are addressed by
// their index; which sequence owns a block is the caller's business (a
// block manager's).
type PagedKV struct {
	cfg              Config
	BlockSize, Count int
	kp, vp           int         // panels per (block, head): of slots for K, of head dimensions for V
	k, v             [][]float32 // per layer: (Count, H, kp, hs, 32) and (Count, H, vp, BlockSize, 32)
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
	W := pgemm.Width
	kv := &PagedKV{cfg: cfg, BlockSize: blockSize, Count: count, kp: (blockSize + W - 1) / W, vp: (cfg.HeadSize() + W - 1) / W}
	for range cfg.Layers {
		kv.k = append(kv.k, make([]float32, count*kv.blockK()))
		kv.v = append(kv.v, make([]float32, count*kv.blockV()))
	}
	return kv, nil
}

// blockK and blockV are the floats of one block in a layer's K and V.
func (kv *PagedKV) blockK() int { return kv.cfg.Heads * kv.kp * kv.cfg.HeadSize() * pgemm.Width }
func (kv *PagedKV) blockV() int { return kv.cfg.Heads * kv.vp * kv.BlockSize * pgemm.Width }

// Bytes is the pool's storage: keys and values of every layer.
func (kv *PagedKV) Bytes() int64 {
	return int64(len(kv.k)) * int64(len(kv.k[0])+len(kv.v[0])) * 4
}

// Copy copies the KV of the first tokens slots of block src into block
// dst, in every layer and head (copy on write, swap out and in). The
// whole block is copied: the slots past tokens are never read before dst's
// owner writes them.
func (kv *PagedKV) Copy(src, dst, tokens int) error {
	if src < 0 || src >= kv.Count || dst < 0 || dst >= kv.Count || tokens < 0 || tokens > kv.BlockSize {
		return fmt.Errorf("%w: copy of %d slots from block %d to %d in a pool of %d blocks of %d", ErrTokens, tokens, src, dst, kv.Count, kv.BlockSize)
	}
	bk, bv := kv.blockK(), kv.blockV()
	for l := range kv.k {
		copy(kv.k[l][dst*bk:(dst+1)*bk], kv.k[l][src*bk:(src+1)*bk])
		copy(kv.v[l][dst*bv:(dst+1)*bv], kv.v[l][src*bv:(src+1)*bv])
	}
	return nil
}

// write stores the key k and value v (hs) of head h at slot of block blk
// in layer l.
func (kv *PagedKV) write(l, blk, h, slot int, k, v []float32) {
	W, hs := pgemm.Width, kv.cfg.HeadSize()
	kb := kv.k[l][blk*kv.blockK()+h*kv.kp*hs*W+(slot/W)*hs*W+slot%W:]
	for d, x := range k {
		kb[d*W] = x
	}
	vb := kv.v[l][blk*kv.blockV()+h*kv.vp*kv.BlockSize*W+slot*W:]
	for d, x := range v {
		vb[(d/W)*kv.BlockSize*W+d%W] = x
	}
}

// kPanel is panel q (slots [32q, 32q+32)) of head h's keys in block blk,
// layer l: (hs, 32); vPanel is panel q (dimensions [32q, 32q+32)) of its
// values: (BlockSize, 32).
func (kv *PagedKV) kPanel(l, blk, h, q int) []float32 {
	n := kv.cfg.HeadSize() * pgemm.Width
	o := blk*kv.blockK() + (h*kv.kp+q)*n
	return kv.k[l][o : o+n]
}

func (kv *PagedKV) vPanel(l, blk, h, q int) []float32 {
	n := kv.BlockSize * pgemm.Width
	o := blk*kv.blockV() + (h*kv.vp+q)*n
	return kv.v[l][o : o+n]
}

// kHeads is block blk's keys in layer l from head 0's panel q to the
// block's end: head h's panel q at h·kp·hs·32; vHeads is its values from
// head 0's panel q, head h's at h·vp·BlockSize·32.
func (kv *PagedKV) kHeads(l, blk, q int) []float32 {
	o := blk * kv.blockK()
	return kv.k[l][o+q*kv.cfg.HeadSize()*pgemm.Width : o+kv.blockK()]
}

func (kv *PagedKV) vHeads(l, blk, q int) []float32 {
	o := blk * kv.blockV()
	return kv.v[l][o+q*kv.BlockSize*pgemm.Width : o+kv.blockV()]
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
	scores, tile       []float32
	rows               []int
	hsel, logits       []float32
}

// NewPagedModel makes the paged forward of p over the pool kv.
func NewPagedModel(p *Params, kv *PagedKV) (*PagedModel, error) {
	return newPagedModel(p, nil, 0, kv)
}

func newPagedModel(p *Params, q *Quantized, kernel Int8Kernel, kv *PagedKV) (*PagedModel, error) {
	cfg := p.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if kc := kv.cfg; kc.Vocab != cfg.Vocab || kc.Block != cfg.Block || kc.Layers != cfg.Layers || kc.Heads != cfg.Heads || kc.Embd != cfg.Embd {
		return nil, fmt.Errorf("%w: paged KV made for %+v, params for %+v", ErrConfig, kc, cfg)
	}
	m := &PagedModel{cfg: cfg, p: p, kv: kv}
	m.lin = newPagedLinears(p, q, kernel)
	return m, nil
}

// NewPagedModelInt8 makes the paged forward of the int8 model q: its
// linear layers multiply by q's int8 matrices with kernel (the weight-only
// or the dynamic one, as WithInt8's graphs do); the rest is float32. The
// tied head must be float32 (QuantizeOptions.Head false).
func NewPagedModelInt8(q *Quantized, kernel Int8Kernel, kv *PagedKV) (*PagedModel, error) {
	if !kernel.Valid() {
		return nil, fmt.Errorf("%w: int8 kernel %v", ErrConfig, kernel)
	}
	if q.Options.Head {
		return nil, fmt.Errorf("%w: the paged forward reads a float32 embedding: quantize without the head", ErrConfig)
	}
	return newPagedModel(q.Params(), q, kernel, kv)
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
// softmax(q·kᵀ/√hs)·v per head, as CausalSoftmax and CausalApply compute,
// one entry and head at a time: the scores of all its rows against one
// block's keys are one pgemm tile, and so are their probabilities times
// one block's values. An entry of one row (a decode token) takes every
// head at once (attendOne).
func (m *PagedModel) attend(entries []PagedEntry, l int) {
	C, H, hs := m.cfg.Embd, m.cfg.Heads, m.cfg.HeadSize()
	kv := m.kv
	bs, W := kv.BlockSize, pgemm.Width
	sc := float32(1 / math.Sqrt(float64(hs)))
	r0 := 0
	for i := range entries {
		e := &entries[i]
		n := len(e.Tokens)
		for j := range n { // every row's K and V first: a prefill's rows read each other's
			row := m.qkv[(r0+j)*3*C : (r0+j+1)*3*C]
			pos := e.Start + j
			blk := int(e.Table[pos/bs])
			for h := range H {
				kv.write(l, blk, h, pos%bs, row[C+h*hs:C+(h+1)*hs], row[2*C+h*hs:2*C+(h+1)*hs])
			}
		}
		if n == 1 && hs%16 == 0 { // a decode token: every head at once
			m.attendOne(e, l, r0)
			r0++
			continue
		}
		nb := (e.Start + n + bs - 1) / bs // blocks the last row sees
		ld := nb * bs                     // a row of scores
		m.scores = grow(m.scores, n*ld)
		m.tile = grow(m.tile, n*W)
		S, tile := m.scores, m.tile
		for h := range H {
			q := m.qkv[r0*3*C+h*hs:]
			for b := range nb {
				blk := int(e.Table[b])
				for p := 0; p*W < bs; p++ {
					pgemm.Tile(tile, W, q, 3*C, n, hs, kv.kPanel(l, blk, h, p)) // (n, 32) = q·kᵀ
					w := min(W, bs-p*W)
					for j := range n {
						copy(S[j*ld+b*bs+p*W:j*ld+b*bs+p*W+w], tile[j*W:j*W+w])
					}
				}
			}
			for j := range n {
				ops.SoftmaxPrefix(S[j*ld:(j+1)*ld], S[j*ld:(j+1)*ld], e.Start+j+1, sc)
			}
			for b := range nb {
				blk := int(e.Table[b])
				for p := 0; p*W < hs; p++ {
					pgemm.Tile(tile, W, S[b*bs:], ld, n, bs, kv.vPanel(l, blk, h, p)) // (n, 32) = probs·v
					w := min(W, hs-p*W)
					for j := range n {
						y := m.y[(r0+j)*C+h*hs+p*W : (r0+j)*C+h*hs+p*W+w]
						if b == 0 {
							copy(y, tile[j*W:j*W+w])
						} else {
							vec.Add(y, y, tile[j*W:j*W+w])
						}
					}
				}
			}
		}
		r0 += n
	}
}

// attendOne is attend for an entry of one row r (a decode token) and a
// head size of a multiple of 16: each call of pgemm.Rows takes every head
// (up to 8 at a time), row h of the query against head h's keys in one
// block, and row h of the probabilities against head h's values, so the
// heads are independent chains in one kernel instead of one each. A
// block's slots past 16 of a panel's 32 are not computed where it has no
// more; the values' products read only the slots up to the row's own and
// continue one FMA chain over the blocks.
func (m *PagedModel) attendOne(e *PagedEntry, l, r int) {
	C, H, hs := m.cfg.Embd, m.cfg.Heads, m.cfg.HeadSize()
	kv := m.kv
	bs, W := kv.BlockSize, pgemm.Width
	sc := float32(1 / math.Sqrt(float64(hs)))
	ctx := e.Start + 1 // positions the row sees
	nb := (ctx + bs - 1) / bs
	ld := nb*bs + W // a head's scores, with room for a panel's columns past the last block
	m.scores = grow(m.scores, H*ld)
	S := m.scores                    // (H, ld)
	q := m.qkv[r*3*C : r*3*C+C]      // (H, hs)
	kh, vh := kv.kp*hs*W, kv.vp*bs*W // floats from one head's panel to the next's
	for b := range nb {
		blk := int(e.Table[b])
		for p := 0; p*W < bs; p++ {
			w := W
			if bs-p*W <= W/2 {
				w = W / 2
			}
			pgemm.Rows(S[b*bs+p*W:], ld, q, hs, kv.kHeads(l, blk, p), kh, H, hs, w, false) // (H, w) = q·kᵀ
		}
	}
	for h := range H {
		ops.SoftmaxPrefix(S[h*ld:h*ld+nb*bs], S[h*ld:h*ld+nb*bs], ctx, sc)
	}
	y := m.y[r*C : (r+1)*C] // (H, hs)
	for b := range nb {
		blk := int(e.Table[b])
		k := min(bs, ctx-b*bs)
		for p := 0; p*W < hs; p++ {
			pgemm.Rows(y[p*W:], hs, S[b*bs:], ld, kv.vHeads(l, blk, p), vh, H, k, min(W, hs-p*W), b > 0) // (H, w) += probs·v
		}
	}
}
