package models

// quantized.go: the GPT with int8 linear weights: the quantized matrices
// (Int8Tensor), the model that holds them beside its float32 rest
// (Quantized), and its weight accounting. The pass that builds them into
// the graph is int8.go; the checkpoint file is quantized_io.go.

import (
	"fmt"
	"strings"
	"sync"

	"gptlab/internal/qgemm"
	"gptlab/models/ops"
	"gptlab/precision"
)

// Int8Tensor is one weight matrix [Rows, Cols] quantized symmetrically
// under a scheme of package precision: codes Q (row-major as the float32
// matrix, [out, in]: output channel j is row j) and Scales (Rows for
// per-channel, 1 for per-tensor, Rows·Int8Blocks(Cols) for block32), so
// W[r,c] ≈ Q[r,c]·Scales[i] with i = Scheme.ScaleIndex(r, c, Cols).
//
// The codes are held once, packed for the int8 kernels (Packed, a
// qgemm.Weights): the graph's int8 input is that memory, and Codes
// unpacks them row-major when a file or a report wants them.
type Int8Tensor struct {
	Name       string
	Rows, Cols int
	Scheme     precision.Int8Scheme
	Scales     []float32
	w          *ops.Int8Weights
}

// NewInt8Tensor checks the codes q (rows·cols, row-major) and scales of
// the matrix name (lengths, finite scales ≥ 0, no code -128, naming the
// tensor) and packs them; q is not kept.
func NewInt8Tensor(name string, rows, cols int, scheme precision.Int8Scheme, q []int8, scales []float32) (*Int8Tensor, error) {
	if err := precision.ValidateInt8(name, q, scales, rows, cols, scheme); err != nil {
		return nil, err
	}
	w, err := qgemm.NewWeights(rows, cols, q, scales, scheme)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Int8Tensor{Name: name, Rows: rows, Cols: cols, Scheme: scheme, Scales: scales, w: w}, nil
}

// Codes is the matrix's codes row-major, [Rows, Cols] (a new slice).
func (t *Int8Tensor) Codes() []int8 { return t.w.Codes() }

// Packed is the codes and scales as the kernels read them, the one copy
// of the codes t holds.
func (t *Int8Tensor) Packed() *ops.Int8Weights { return t.w }

// Bytes is the tensor's storage: one byte a code, four a scale.
func (t *Int8Tensor) Bytes() int64 { return int64(t.Rows*t.Cols) + 4*int64(len(t.Scales)) }

// ResidentBytes is what t holds in memory: the packed codes (padding
// included), their scales and u8·s8 corrections in the kernels' layout,
// and the scales as stored (the graph's scales input).
func (t *Int8Tensor) ResidentBytes() int64 { return int64(t.w.Bytes()) + 4*int64(len(t.Scales)) }

// RowRange is rows [lo, hi) as a tensor of its own (a per-tensor scale is
// shared): c_attn's q, k and v blocks. Rows of every scheme quantize
// independently of the rows beside them but for per-tensor's one scale,
// so a row range is exactly what quantizing those rows under that scale
// gives. On whole panels of 16 rows (lo and hi multiples of 16, as every
// preset's) it shares t's packed memory; otherwise its rows are packed
// anew, a second copy of them.
func (t *Int8Tensor) RowRange(lo, hi int) *Int8Tensor {
	s := t.Scales
	switch t.Scheme {
	case precision.Int8PerChannel:
		s = s[lo:hi:hi]
	case precision.Int8PerBlock32:
		nb := precision.Int8Blocks(t.Cols)
		s = s[lo*nb : hi*nb : hi*nb]
	}
	name := fmt.Sprintf("%s[%d:%d]", t.Name, lo, hi)
	if w, ok := t.w.Rows(lo, hi); ok {
		return &Int8Tensor{Name: name, Rows: hi - lo, Cols: t.Cols, Scheme: t.Scheme, Scales: s, w: w}
	}
	r, err := NewInt8Tensor(name, hi-lo, t.Cols, t.Scheme, t.Codes()[lo*t.Cols:hi*t.Cols], s)
	if err != nil {
		panic(fmt.Sprintf("models: rows of %s, validated when made: %v", t.Name, err))
	}
	return r
}

// Dequantize is the float32 matrix the codes stand for, Q·scale.
func (t *Int8Tensor) Dequantize() []float32 {
	w := make([]float32, t.Rows*t.Cols)
	precision.DequantizeInt8(w, t.Codes(), t.Scales, t.Rows, t.Cols, t.Scheme)
	return w
}

// QuantizeOptions say what Quantize makes int8.
type QuantizeOptions struct {
	Scheme precision.Int8Scheme // which values share a scale
	// Head quantizes the tied head too: the token embedding, which the
	// head multiplies by and the embedding lookup reads (per row: a
	// token's embedding is the head's output channel for that token).
	Head bool
}

// Quantized is the GPT with int8 weights: the linear layers' matrices
// (attention c_attn and c_proj, MLP c_fc and c_proj; with Head the token
// embedding, which the tied head reads) as Int8Tensors, everything else
// (embeddings, LayerNorms, biases) float32 in Params, which holds no
// float32 copy of a quantized matrix. A model of it is built with WithInt8
// on Params; its graph multiplies by the int8 matrices (ops.Int8Linear).
type Quantized struct {
	Options QuantizeOptions
	params  *Params // the float32 rest
	weights map[string]*Int8Tensor
	names   []string // the quantized tensors, in nanoGPT's order

	mu     sync.Mutex
	ranges map[string]*Int8Tensor // row ranges made for graphs (c_attn's q, k, v), by name
}

// IsLinearWeight reports whether name is a linear layer's weight matrix
// (what Quantize makes int8): attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj.
func IsLinearWeight(name string) bool {
	for _, s := range []string{".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// headWeight is the tied head's matrix: the token embedding.
const headWeight = "transformer.wte.weight"

// quantizes reports whether o makes the parameter name int8.
func (o QuantizeOptions) quantizes(name string) bool {
	return IsLinearWeight(name) || o.Head && name == headWeight
}

// Quantize makes p's linear weights (and with o.Head the tied head's)
// int8 under o.Scheme. A NaN or an infinity is refused, naming the tensor
// and the element (precision.ErrNonFinite).
func Quantize(p *Params, o QuantizeOptions) (*Quantized, error) {
	if !o.Scheme.Valid() {
		return nil, fmt.Errorf("%w: int8 scheme %v", ErrConfig, o.Scheme)
	}
	q := &Quantized{Options: o, weights: map[string]*Int8Tensor{}}
	q.params = zeroParamsOf(p.Config(), func(n string) bool { return !o.quantizes(n) })
	for _, name := range p.Names() {
		if !o.quantizes(name) {
			copy(q.params.Slice(name), p.Slice(name))
			continue
		}
		s := p.Shape(name)
		codes, scales, err := precision.QuantizeInt8(name, p.Slice(name), s[0], s[1], o.Scheme)
		if err != nil {
			return nil, fmt.Errorf("quantize: %w", err)
		}
		t, err := NewInt8Tensor(name, s[0], s[1], o.Scheme, codes, scales)
		if err != nil {
			return nil, fmt.Errorf("quantize: %w", err)
		}
		q.add(t)
	}
	return q, nil
}

func (q *Quantized) add(t *Int8Tensor) {
	q.weights[t.Name] = t
	q.names = append(q.names, t.Name)
}

// Config is the model's configuration.
func (q *Quantized) Config() Config { return q.params.Config() }

// Params is the float32 part: every parameter but the quantized ones.
// Build a model of q with it and WithInt8(q, …).
func (q *Quantized) Params() *Params { return q.params }

// Names lists the int8 tensors in nanoGPT's order. Do not modify it.
func (q *Quantized) Names() []string { return q.names }

// Tensor is the named int8 tensor, or nil.
func (q *Quantized) Tensor(name string) *Int8Tensor { return q.weights[name] }

// Dequantize is the float32 model the int8 one stands for: every
// parameter, the quantized ones as Q·scale. A model of it computes what
// the weight-only int8 kernel computes, up to the order of float32 sums.
func (q *Quantized) Dequantize() *Params {
	p := ZeroParams(q.Config())
	for _, name := range p.Names() {
		if t := q.weights[name]; t != nil {
			copy(p.Slice(name), t.Dequantize())
		} else {
			copy(p.Slice(name), q.params.Slice(name))
		}
	}
	return p
}

// WeightBytes are a model's weight bytes, split as the linear layers'
// matrices and the rest.
type WeightBytes struct {
	Linear int64 // the linear layers' matrices (int8: codes and scales)
	Head   int64 // the token embedding (the tied head), in its form
	Rest   int64 // everything else, float32 (position embedding, LayerNorms, biases)
}

// Total is every weight byte.
func (b WeightBytes) Total() int64 { return b.Linear + b.Head + b.Rest }

// Bytes are the float32 model's weight bytes, split as WeightBytes.
func (p *Params) Bytes() WeightBytes {
	var b WeightBytes
	for _, name := range p.Names() {
		n := 4 * int64(len(p.Slice(name)))
		switch {
		case IsLinearWeight(name):
			b.Linear += n
		case name == headWeight:
			b.Head += n
		default:
			b.Rest += n
		}
	}
	return b
}

// Bytes are the int8 model's weight bytes: codes at one byte, scales and
// the float32 rest at four.
func (q *Quantized) Bytes() WeightBytes {
	b := q.params.Bytes()
	for _, t := range q.weights {
		if t.Name == headWeight {
			b.Head += t.Bytes()
		} else {
			b.Linear += t.Bytes()
		}
	}
	return b
}

// SQNR is the signal-to-quantization-noise ratio in dB of each int8
// tensor against the float32 weights p it was made from, in Names order.
func (q *Quantized) SQNR(p *Params) []float64 {
	out := make([]float64, len(q.names))
	for i, name := range q.names {
		out[i] = precision.SQNR(p.Slice(name), q.weights[name].Dequantize())
	}
	return out
}

// checkComplete fails unless q holds every parameter of its config, in
// float32 or int8, once.
func (q *Quantized) checkComplete() error {
	names, shapes := paramLayout(q.Config())
	for i, name := range names {
		t, isInt8 := q.weights[name]
		switch {
		case isInt8 && q.params.Has(name):
			return fmt.Errorf("%w: tensor %q is both int8 and float32", ErrConfig, name)
		case isInt8 && (len(shapes[i]) != 2 || t.Rows != shapes[i][0] || t.Cols != shapes[i][1]):
			return fmt.Errorf("%w: int8 tensor %q has shape [%d %d], want %v", ErrConfig, name, t.Rows, t.Cols, shapes[i])
		case !isInt8 && !q.params.Has(name):
			return fmt.Errorf("%w: tensor %q missing (want shape %v)", ErrConfig, name, shapes[i])
		}
	}
	return nil
}

// rows is rows [lo, hi) of the int8 tensor name (all of it for hi 0),
// made once per range and shared by every graph of q.
func (q *Quantized) rows(name string, lo, hi int) *Int8Tensor {
	t := q.weights[name]
	if t == nil || hi == 0 {
		return t
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	key := fmt.Sprintf("%s[%d:%d]", name, lo, hi)
	if r, ok := q.ranges[key]; ok {
		return r
	}
	if q.ranges == nil {
		q.ranges = map[string]*Int8Tensor{}
	}
	q.ranges[key] = t.RowRange(lo, hi)
	return q.ranges[key]
}
