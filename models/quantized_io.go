package models

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"

	"gptlab/internal/safetensors"
	"gptlab/precision"
)

// An int8 checkpoint is one safetensors file (written atomically):
//
//	<parameter name>          F32  every parameter kept in float32
//	<parameter name>          I8   [out, in] the codes of a quantized matrix
//	<parameter name>.scales   F32  its scales: [out] (channel), [1] (tensor),
//	                               [out, ceil(in/32)] (block32)
//
// and in __metadata__ the training checkpoint's (the model config, the
// training settings, the vocabulary and the name and hash of the data,
// the step; not the optimizer's or the batch stream's state, which an
// int8 model has no use for) with format Int8Format, quant_scheme (the
// scheme's name), quant_rounding (precision.Int8Rounding: round to
// nearest, ties to even, codes clamped to [-127, 127]) and quant_head
// ("int8" when the tied head, and with it the token embedding, is
// quantized; else "f32").

// Int8Format is the __metadata__ "format" of an int8 checkpoint.
const Int8Format = "gptlab-int8-1"

// ErrNotInt8 marks a file that is not an int8 checkpoint; it wraps
// ErrCheckpoint.
var ErrNotInt8 = fmt.Errorf("%w: not an int8 checkpoint", ErrCheckpoint)

// ErrAlreadyInt8 marks an int8 checkpoint where a float32 one is wanted
// (quantizing twice); it wraps ErrCheckpoint.
var ErrAlreadyInt8 = fmt.Errorf("%w: already quantized", ErrCheckpoint)

// scalesSuffix names a quantized matrix's scales beside it.
const scalesSuffix = ".scales"

// Int8Checkpoint is a decoded int8 checkpoint: the int8 model and what
// evaluating and sampling it need of the run that trained it.
type Int8Checkpoint struct {
	Model       *Quantized
	Vocab       string // Tokenizer.Chars of the data it was trained on
	DataName    string // Dataset.Name: a path or "markov:seed=N"
	DataHash    string // DataHash of that dataset
	Step        int    // the training step it was quantized at
	Seed        int64  // the run's seed (its validation batches)
	EvalBatches int    // the run's validation batches
	// SQNR is each int8 tensor's (in Model.Names order) against the
	// float32 weights it was made from, in dB; nil for a file loaded.
	SQNR []float64
	meta map[string]string
}

// trainingState are the training checkpoint's metadata keys an int8
// checkpoint drops: the optimizer's, the batch stream's and the loss
// scaler's state.
var trainingState = []string{"batcher", "adamw_step", "loss_scale", "loss_scale_tracker", "loss_scale_steps", "loss_scale_skipped"}

// QuantizeCheckpoint reads the training checkpoint at path (as
// LoadCheckpoint: checked whole) and quantizes its model under o. An int8
// checkpoint is refused (ErrAlreadyInt8), a non-finite weight too
// (precision.ErrNonFinite, naming the tensor and the element).
func QuantizeCheckpoint(path string, o QuantizeOptions) (*Int8Checkpoint, error) {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if meta["format"] == Int8Format {
		return nil, fmt.Errorf("%s: %w (scheme %s): quantize its float32 training checkpoint", path, ErrAlreadyInt8, meta["quant_scheme"])
	}
	ck, err := decodeCheckpoint(ts, meta)
	if err != nil {
		if errors.Is(err, ErrParamsOnly) {
			return nil, fmt.Errorf("%s: %w: pass a training checkpoint (model.safetensors in the --out directory of gptlab gpt train)", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	q, err := Quantize(ck.Params, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	kept := maps.Clone(meta)
	for _, k := range trainingState {
		delete(kept, k)
	}
	return &Int8Checkpoint{Model: q, Vocab: ck.Vocab, DataName: ck.DataName, DataHash: ck.DataHash, Step: ck.Step,
		Seed: ck.Cfg.Seed, EvalBatches: ck.Cfg.EvalBatches, SQNR: q.SQNR(ck.Params), meta: kept}, nil
}

// Metadata is the file's __metadata__.
func (c *Int8Checkpoint) Metadata() map[string]string {
	meta := maps.Clone(c.meta)
	if meta == nil {
		meta = map[string]string{}
	}
	maps.Copy(meta, c.Model.Config().Metadata())
	head := "f32"
	if c.Model.Options.Head {
		head = "int8"
	}
	maps.Copy(meta, map[string]string{
		"format": Int8Format, "quant_scheme": c.Model.Options.Scheme.String(), "quant_rounding": precision.Int8Rounding,
		"quant_head": head, "vocab": c.Vocab, "data": c.DataName, "data_hash": c.DataHash,
		"step": strconv.Itoa(c.Step), "seed": strconv.FormatInt(c.Seed, 10), "eval_batches": strconv.Itoa(c.EvalBatches),
	})
	return meta
}

// scalesShape is the shape t's scales are stored in.
func scalesShape(t *Int8Tensor) []int {
	switch t.Scheme {
	case precision.Int8PerTensor:
		return []int{1}
	case precision.Int8PerBlock32:
		return []int{t.Rows, precision.Int8Blocks(t.Cols)}
	}
	return []int{t.Rows}
}

// Tensors are the file's tensors, sharing q's memory but for the codes
// (unpacked row-major from the packed ones).
func (q *Quantized) Tensors() map[string]safetensors.Tensor {
	ts := q.params.Tensors("")
	for _, name := range q.names {
		t := q.weights[name]
		ts[name] = safetensors.I8([]int{t.Rows, t.Cols}, t.Codes())
		ts[name+scalesSuffix] = safetensors.F32(scalesShape(t), t.Scales)
	}
	return ts
}

// Save writes the int8 checkpoint to path atomically.
func (c *Int8Checkpoint) Save(path string) error {
	if err := safetensors.Write(path, c.Model.Tensors(), c.Metadata()); err != nil {
		return fmt.Errorf("save int8 checkpoint: %w", err)
	}
	return nil
}

// LoadInt8Checkpoint reads an int8 checkpoint written by Save. A file of
// another format is an error wrapping ErrNotInt8; every tensor is
// checked: a float32 tensor missing, mis-shaped or non-finite, a
// quantized matrix of the wrong dtype or shape, its scales missing, of
// the wrong shape, negative or non-finite, a code -128, an unexpected
// tensor: an error naming the tensor and what is wrong.
func LoadInt8Checkpoint(path string) (*Int8Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	c, err := DecodeInt8Checkpoint(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// DecodeInt8Checkpoint parses an int8 checkpoint held in memory (see
// LoadInt8Checkpoint).
func DecodeInt8Checkpoint(b []byte) (*Int8Checkpoint, error) {
	ts, meta, err := safetensors.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if f := meta["format"]; f != Int8Format {
		return nil, fmt.Errorf("%w: format %q, want %q (written by gptlab gpt quantize)", ErrNotInt8, f, Int8Format)
	}
	var o QuantizeOptions
	if err := o.Scheme.UnmarshalText([]byte(meta["quant_scheme"])); err != nil {
		return nil, fmt.Errorf("%w: metadata quant_scheme: %w", ErrCheckpoint, err)
	}
	switch meta["quant_head"] {
	case "int8":
		o.Head = true
	case "f32":
	default:
		return nil, fmt.Errorf("%w: metadata quant_head = %q, want int8 or f32", ErrCheckpoint, meta["quant_head"])
	}
	if r := meta["quant_rounding"]; r != precision.Int8Rounding {
		return nil, fmt.Errorf("%w: metadata quant_rounding = %q, want %q", ErrCheckpoint, r, precision.Int8Rounding)
	}
	cfg, err := ConfigFromMetadata(meta)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	c := &Int8Checkpoint{Vocab: meta["vocab"], DataName: meta["data"], DataHash: meta["data_hash"], meta: meta}
	mr := metaReader{meta: meta}
	c.Step, c.Seed, c.EvalBatches = mr.int("step"), mr.int64("seed"), mr.int("eval_batches")
	if mr.err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrCheckpoint, mr.err)
	}
	if tok, err := TokenizerFromChars(c.Vocab); err != nil || tok.Vocab() != cfg.Vocab {
		return nil, fmt.Errorf("%w: vocabulary %q does not match vocab_size %d", ErrCheckpoint, c.Vocab, cfg.Vocab)
	}
	if c.EvalBatches < 1 {
		return nil, fmt.Errorf("%w: metadata eval_batches = %d, want 1 or more", ErrCheckpoint, c.EvalBatches)
	}
	if c.Model, err = decodeQuantized(ts, cfg, o); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return c, nil
}

// decodeQuantized checks and builds the int8 model of cfg under o from a
// file's tensors.
func decodeQuantized(ts map[string]safetensors.Tensor, cfg Config, o QuantizeOptions) (*Quantized, error) {
	q := &Quantized{Options: o, weights: map[string]*Int8Tensor{}}
	q.params = zeroParamsOf(cfg, func(n string) bool { return !o.quantizes(n) })
	if err := q.params.LoadInto(ts, "", false); err != nil {
		return nil, err
	}
	names, shapes := paramLayout(cfg)
	known := map[string]bool{}
	for i, name := range names {
		known[name] = true
		if !o.quantizes(name) {
			continue
		}
		known[name+scalesSuffix] = true
		want := &Int8Tensor{Name: name, Rows: shapes[i][0], Cols: shapes[i][1], Scheme: o.Scheme}
		t, ok := ts[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("int8 tensor %q missing (want I8 shape %v)", name, shapes[i])
		case t.DType != "I8":
			return nil, fmt.Errorf("tensor %q has dtype %s, want I8 (quantized %s)", name, t.DType, o.Scheme)
		case !slices.Equal(t.Shape, shapes[i]):
			return nil, fmt.Errorf("int8 tensor %q has shape %v, want %v", name, t.Shape, shapes[i])
		}
		s, ok := ts[name+scalesSuffix]
		wantS := scalesShape(want)
		switch {
		case !ok:
			return nil, fmt.Errorf("scales %q of int8 tensor %q missing (want F32 shape %v for %s)", name+scalesSuffix, name, wantS, o.Scheme)
		case s.DType != "F32" || !slices.Equal(s.Shape, wantS):
			return nil, fmt.Errorf("scales %q have dtype %s shape %v, want F32 shape %v (%s scales of %v)", name+scalesSuffix, s.DType, s.Shape, wantS, o.Scheme, shapes[i])
		}
		it, err := NewInt8Tensor(name, want.Rows, want.Cols, o.Scheme, t.I8, s.F32)
		if err != nil {
			return nil, err
		}
		q.add(it)
	}
	var extra []string
	for n := range ts {
		if !known[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("unexpected tensor %q (%s shape %v) is not a parameter of this config", extra[0], ts[extra[0]].DType, ts[extra[0]].Shape)
	}
	return q, q.checkComplete()
}

// checkpoint is the part of a training checkpoint that finds and checks
// the data.
func (c *Int8Checkpoint) checkpoint() *Checkpoint {
	return &Checkpoint{Cfg: TrainConfig{Model: c.Model.Config()}, Vocab: c.Vocab, DataName: c.DataName, DataHash: c.DataHash}
}

// LoadData loads the dataset the model was trained on (as
// Checkpoint.LoadData: its hash must match).
func (c *Int8Checkpoint) LoadData() (*Dataset, error) { return c.checkpoint().LoadData() }

// Tokenizer is the vocabulary the model reads.
func (c *Int8Checkpoint) Tokenizer() *Tokenizer { return c.checkpoint().Tokenizer() }

// ValLosses is the int8 model's loss, by kernel, on each of the n
// validation batches of its run on data (the batches Trainer.ValLosses
// of the float32 model sees).
func (c *Int8Checkpoint) ValLosses(data *Dataset, n int, kernel Int8Kernel) ([]float64, error) {
	q := c.Model
	mc := q.Config()
	m, err := NewModel(mc, q.Params(), mc.Batch, mc.Block, false, WithInt8(q, kernel))
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var out []float64
	err = ValBatches(data, mc, c.Seed, n, func(idx, tgt []int32) error {
		l, err := m.Step(idx, tgt)
		out = append(out, float64(l))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}
	return out, nil
}
