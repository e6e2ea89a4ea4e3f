package models

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gptlab/internal/safetensors"
	"gptlab/precision"
)

// A training checkpoint is one safetensors file (written atomically):
//
//	<parameter name>   F32  every parameter, as in a model checkpoint
//	adamw.m, adamw.v   F32  [Params.Count()] the AdamW moments, laid out like Params.Data
//	train.losses       F32  [steps] the loss of every step so far
//	train.history      F32  [points, 3] validations: step, train loss, val loss
//
// and in __metadata__ the model config (Config.Metadata), the training
// settings, the step, AdamW's step count, the batch stream's PCG state
// (hex), the vocabulary and the name and hash of the data, the precision
// policy and, under loss scaling, the scaler's state. Float settings
// are written with strconv's shortest exact form, so a resumed run uses
// the very same bits. Settings are the values used (beta2 0.95, not 0);
// checkpoints written before that hold beta2 "0" for DefaultBeta2 and
// load as such.

// CheckpointFormat is the __metadata__ "format" of a training checkpoint.
const CheckpointFormat = "gptlab-train-2"

// ErrCheckpoint marks a checkpoint that cannot be used.
var ErrCheckpoint = errors.New("bad checkpoint")

// Checkpoint is a decoded training checkpoint.
type Checkpoint struct {
	Cfg      TrainConfig
	Params   *Params
	Vocab    string // Tokenizer.Chars of the data it was trained on
	DataName string // Dataset.Name: a path or "markov:seed=N"
	DataHash string // DataHash of that dataset
	Step     int
	adamStep int64
	m, v     []float32
	batcher  []byte
	losses   []float32
	history  []Point
	scaler   *precision.ScalerState // the loss scaler's, under a policy with loss scaling
}

// DataHash is a fingerprint (FNV-1a 64, hex) of a dataset's vocabulary and
// tokens, so a resumed run can refuse different data.
func DataHash(d *Dataset) string {
	h := fnv.New64a()
	h.Write([]byte(d.Tok.Chars()))
	var b [4]byte
	for _, part := range [][]int32{d.Train, {-1}, d.Val} {
		for _, id := range part {
			binary.LittleEndian.PutUint32(b[:], uint32(id))
			h.Write(b[:])
		}
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// Save writes the trainer's whole state to path atomically.
func (t *Trainer) Save(path string) error {
	ts := t.Params.Tensors("")
	m, v, astep := t.Opt.State()
	ts["adamw.m"] = safetensors.F32([]int{len(m)}, m)
	ts["adamw.v"] = safetensors.F32([]int{len(v)}, v)
	ts["train.losses"] = safetensors.F32([]int{len(t.Losses)}, t.Losses)
	hist := make([]float32, 0, 3*len(t.History))
	for _, p := range t.History {
		hist = append(hist, float32(p.Step), float32(p.Train), float32(p.Val))
	}
	ts["train.history"] = safetensors.F32([]int{len(t.History), 3}, hist)
	state, err := t.batches.State()
	if err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	meta := t.Cfg.Model.Metadata()
	c := t.Cfg
	for k, v := range map[string]string{
		"format":       CheckpointFormat,
		"iters":        strconv.Itoa(c.Iters),
		"lr":           strconv.FormatFloat(c.LR, 'g', -1, 64),
		"warmup":       strconv.Itoa(c.Warmup),
		"eval_every":   strconv.Itoa(c.EvalEvery),
		"eval_batches": strconv.Itoa(c.EvalBatches),
		"beta2":        strconv.FormatFloat(c.Beta2, 'g', -1, 64),
		"grad_clip":    strconv.FormatFloat(c.GradClip, 'g', -1, 64),
		"seed":         strconv.FormatInt(c.Seed, 10),
		"step":         strconv.Itoa(t.step),
		"adamw_step":   strconv.FormatInt(astep, 10),
		"batcher":      hex.EncodeToString(state),
		"vocab":        t.Data.Tok.Chars(),
		"data":         t.Data.Name,
		"data_hash":    DataHash(t.Data),
		"precision":    c.Precision.Name,
	} {
		meta[k] = v
	}
	if t.scaler != nil {
		st := t.scaler.State()
		meta["loss_scale"] = strconv.FormatFloat(float64(st.Scale), 'g', -1, 32)
		meta["loss_scale_tracker"] = strconv.Itoa(st.Tracker)
		meta["loss_scale_steps"] = strconv.Itoa(st.Steps)
		meta["loss_scale_skipped"] = strconv.Itoa(st.Skipped)
	}
	if err := safetensors.Write(path, ts, meta); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// ErrParamsOnly marks a file that holds parameters alone (SaveParams's
// params.safetensors, or the reference's model file) where a training
// checkpoint is wanted; it wraps ErrCheckpoint.
var ErrParamsOnly = fmt.Errorf("%w: the parameters alone (no vocabulary, data or AdamW state)", ErrCheckpoint)

// LoadCheckpoint reads a training checkpoint written by Trainer.Save.
// Given a file of parameters alone, its error (wrapping ErrParamsOnly)
// names the training checkpoint to pass instead: model.safetensors beside
// it when there is one.
func LoadCheckpoint(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpoint, err)
	}
	ck, err := DecodeCheckpoint(b)
	if errors.Is(err, ErrParamsOnly) {
		beside := filepath.Join(filepath.Dir(path), "model.safetensors")
		if st, serr := os.Stat(beside); serr == nil && st.Mode().IsRegular() && filepath.Clean(path) != beside {
			return nil, fmt.Errorf("%s: %w: pass %s, the training checkpoint gpt train --out wrote beside it", path, err, beside)
		}
		return nil, fmt.Errorf("%s: %w: pass a training checkpoint (model.safetensors in the --out directory of gptlab gpt train)", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ck, nil
}

// DecodeCheckpoint parses a training checkpoint held in memory. Every
// field is checked, so a malformed file is an error, never a panic; a NaN
// or an infinity in the weights or the AdamW moments is an error wrapping
// ErrNonFinite that names the tensor and the first bad index.
func DecodeCheckpoint(b []byte) (*Checkpoint, error) {
	ts, meta, err := safetensors.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return decodeCheckpoint(ts, meta)
}

// decodeCheckpoint is DecodeCheckpoint on the decoded file.
func decodeCheckpoint(ts map[string]safetensors.Tensor, meta map[string]string) (*Checkpoint, error) {
	if f := meta["format"]; f != CheckpointFormat {
		if _, moments := ts["adamw.m"]; !moments && f == "" {
			if _, err := ConfigFromMetadata(meta); err == nil {
				return nil, ErrParamsOnly
			}
		}
		return nil, fmt.Errorf("%w: format %q, want %q (a training checkpoint written by gptlab gpt train)", ErrCheckpoint, f, CheckpointFormat)
	}
	mc, err := ConfigFromMetadata(meta)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	ck := &Checkpoint{Vocab: meta["vocab"], DataName: meta["data"], DataHash: meta["data_hash"]}
	mr := metaReader{meta: meta}
	ck.Cfg = TrainConfig{
		Model:       mc,
		Iters:       mr.int("iters"),
		LR:          mr.float("lr"),
		Warmup:      mr.int("warmup"),
		EvalEvery:   mr.int("eval_every"),
		EvalBatches: mr.int("eval_batches"),
		Beta2:       mr.float("beta2"),
		GradClip:    mr.float("grad_clip"),
		Seed:        mr.int64("seed"),
	}
	if name := meta["precision"]; name != "" { // absent before mixed precision: f32
		if err := ck.Cfg.Precision.UnmarshalText([]byte(name)); err != nil {
			return nil, fmt.Errorf("%w: precision %q: %w", ErrCheckpoint, name, err)
		}
	}
	ck.Cfg = ck.Cfg.withDefaults() // older checkpoints: beta2 "0" meant DefaultBeta2
	ck.Step = mr.int("step")
	ck.adamStep = mr.int64("adamw_step")
	if _, ok := meta["loss_scale"]; ok {
		ck.scaler = &precision.ScalerState{Scale: float32(mr.float("loss_scale")), Tracker: mr.int("loss_scale_tracker"),
			Steps: mr.int("loss_scale_steps"), Skipped: mr.int("loss_scale_skipped")}
	}
	if mr.err == nil {
		var err error
		ck.batcher, err = hex.DecodeString(meta["batcher"])
		if err == nil {
			err = new(rand.PCG).UnmarshalBinary(ck.batcher)
		}
		if err != nil {
			mr.err = fmt.Errorf("batcher = %.40q is not a PCG state: %v", meta["batcher"], err)
		}
	}
	if mr.err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrCheckpoint, mr.err)
	}
	if err := ck.Cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if ck.Step < 0 || ck.Step > ck.Cfg.Iters {
		return nil, fmt.Errorf("%w: step %d outside [0, iters %d]", ErrCheckpoint, ck.Step, ck.Cfg.Iters)
	}
	if tok, err := TokenizerFromChars(ck.Vocab); err != nil || tok.Vocab() != mc.Vocab {
		return nil, fmt.Errorf("%w: vocabulary %q does not match vocab_size %d", ErrCheckpoint, ck.Vocab, mc.Vocab)
	}
	ck.Params = ZeroParams(mc)
	if err := ck.Params.LoadInto(ts, "", false); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	n := ck.Params.Count()
	vec := func(name string, want int) ([]float32, error) {
		t, ok := ts[name]
		if !ok || t.DType != "F32" || len(t.Shape) != 1 || len(t.F32) != want {
			return nil, fmt.Errorf("%w: tensor %q missing or not F32 of %d values", ErrCheckpoint, name, want)
		}
		return t.F32, nil
	}
	moments := func(name string, want int) ([]float32, error) {
		v, err := vec(name, want)
		if err == nil {
			if err = checkFinite(name, []int{want}, v); err != nil {
				err = fmt.Errorf("%w: %w", ErrCheckpoint, err)
			}
		}
		return v, err
	}
	if ck.m, err = moments("adamw.m", n); err != nil {
		return nil, err
	}
	if ck.v, err = moments("adamw.v", n); err != nil {
		return nil, err
	}
	if ck.losses, err = vec("train.losses", ck.Step); err != nil {
		return nil, err
	}
	h, ok := ts["train.history"]
	if !ok || h.DType != "F32" || len(h.Shape) != 2 || h.Shape[1] != 3 {
		return nil, fmt.Errorf("%w: tensor \"train.history\" missing or not F32 [points, 3]", ErrCheckpoint)
	}
	for i := 0; i+3 <= len(h.F32); i += 3 {
		s := h.F32[i]
		if !(s >= 0 && s <= float32(ck.Step)) || s != float32(math.Trunc(float64(s))) {
			return nil, fmt.Errorf("%w: train.history row %d has step %v outside [0, %d]", ErrCheckpoint, i/3, s, ck.Step)
		}
		ck.history = append(ck.history, Point{Step: int(s), Train: float64(h.F32[i+1]), Val: float64(h.F32[i+2])})
	}
	return ck, nil
}

// metaReader parses __metadata__ values, keeping the first error.
type metaReader struct {
	meta map[string]string
	err  error
}

func (r *metaReader) int64(key string) int64 {
	if r.err != nil {
		return 0
	}
	n, err := strconv.ParseInt(r.meta[key], 10, 64)
	if err != nil {
		r.err = fmt.Errorf("%s = %q is not an integer", key, r.meta[key])
	}
	return n
}

func (r *metaReader) int(key string) int {
	n := r.int64(key)
	if r.err == nil && (n < math.MinInt32 || n > math.MaxInt32) {
		r.err = fmt.Errorf("%s = %d out of range", key, n)
	}
	return int(n)
}

func (r *metaReader) float(key string) float64 {
	if r.err != nil {
		return 0
	}
	x, err := strconv.ParseFloat(r.meta[key], 64)
	if err != nil {
		r.err = fmt.Errorf("%s = %q is not a number", key, r.meta[key])
	}
	return x
}

// LoadData loads the dataset the checkpoint was trained on: the embedded
// corpus is generated again from its seed, a file is read again from its
// path. The data's hash must match.
func (ck *Checkpoint) LoadData() (*Dataset, error) {
	var d *Dataset
	var err error
	if s, ok := strings.CutPrefix(ck.DataName, "markov:seed="); ok {
		seed, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("%w: data %q", ErrCheckpoint, ck.DataName)
		}
		d, err = DefaultCorpus(seed, ck.Cfg.Model.Block)
	} else {
		d, err = LoadText(ck.DataName, ck.Cfg.Model.Block)
	}
	if err != nil {
		return nil, err
	}
	return d, ck.checkData(d)
}

func (ck *Checkpoint) checkData(d *Dataset) error {
	if got := DataHash(d); got != ck.DataHash {
		return fmt.Errorf("%w: data %s (hash %s) is not the data the checkpoint was trained on (%s, hash %s)", ErrBadData, d.Name, got, ck.DataName, ck.DataHash)
	}
	return nil
}

// Resume rebuilds the trainer of a checkpoint on its data (which must be
// the same data: the hash is checked). The next TrainStep is the one the
// saved run would have taken next.
func (ck *Checkpoint) Resume(data *Dataset) (*Trainer, error) {
	if err := ck.checkData(data); err != nil {
		return nil, err
	}
	p := ck.Params.Clone()
	t, err := newTrainer(ck.Cfg, data, p)
	if err != nil {
		return nil, err
	}
	if err := t.ensureModel(); err != nil {
		return nil, err
	}
	if err := t.Opt.SetState(ck.m, ck.v, ck.adamStep); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if err := t.batches.SetState(ck.batcher); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	switch {
	case t.scaler != nil && ck.scaler == nil:
		return nil, fmt.Errorf("%w: precision %s scales the loss, but the checkpoint has no loss scale", ErrCheckpoint, ck.Cfg.Precision.Name)
	case t.scaler != nil:
		if err := t.scaler.SetState(*ck.scaler); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
	}
	t.step = ck.Step
	t.Losses = append([]float32(nil), ck.losses...)
	t.History = append([]Point(nil), ck.history...)
	return t, nil
}

// Tokenizer is the vocabulary the checkpoint's model reads.
func (ck *Checkpoint) Tokenizer() *Tokenizer {
	tok, _ := TokenizerFromChars(ck.Vocab) // checked by DecodeCheckpoint
	return tok
}
