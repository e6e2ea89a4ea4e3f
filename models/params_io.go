package models

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"gptlab/internal/safetensors"
)

// ErrNonFinite marks a tensor of weights (or of AdamW moments) holding a
// NaN or an infinity; every loader refuses such a file, naming the tensor
// and the first bad index.
var ErrNonFinite = errors.New("non-finite value")

// firstNonFinite is the index of the first NaN or infinity in v, or -1
// (one pass over the bits: exponent all ones).
func firstNonFinite(v []float32) int {
	for i, x := range v {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// checkFinite is an error wrapping ErrNonFinite when the tensor name of
// that shape holds a NaN or an infinity: "tensor NAME: non-finite value
// NaN at index I" (with the element's coordinates when it has two or more
// dimensions).
func checkFinite(name string, shape []int, v []float32) error {
	i := firstNonFinite(v)
	if i < 0 {
		return nil
	}
	at := ""
	if len(shape) > 1 {
		coord := make([]int, len(shape))
		for k, rest := len(shape)-1, i; k >= 0; k-- {
			if shape[k] > 0 {
				coord[k], rest = rest%shape[k], rest/shape[k]
			}
		}
		at = fmt.Sprintf(" (element %v of %v)", coord, shape)
	}
	return fmt.Errorf("tensor %q: %w %v at index %d%s", name, ErrNonFinite, v[i], i, at)
}

// Tensors returns every parameter as an F32 safetensors.Tensor sharing
// p's memory, under prefix+name.
func (p *Params) Tensors(prefix string) map[string]safetensors.Tensor {
	out := make(map[string]safetensors.Tensor, len(p.names))
	for i, n := range p.names {
		out[prefix+n] = safetensors.F32(p.shapes[i], p.slice(i))
	}
	return out
}

// LoadInto copies the tensors named prefix+name into p. A missing or extra
// tensor (when strict, every tensor under prefix must be a parameter), a
// wrong dtype or a wrong shape is an error naming the tensor and both
// shapes; a NaN or an infinity is an error wrapping ErrNonFinite naming
// the tensor and the first bad index. p is unchanged on an error.
func (p *Params) LoadInto(tensors map[string]safetensors.Tensor, prefix string, strict bool) error {
	for i, n := range p.names {
		t, ok := tensors[prefix+n]
		if !ok {
			return fmt.Errorf("load params: tensor %q missing (want shape %v)", prefix+n, p.shapes[i])
		}
		if t.DType != "F32" {
			return fmt.Errorf("load params: tensor %q has dtype %s shape %v, want F32 shape %v", prefix+n, t.DType, t.Shape, p.shapes[i])
		}
		if !slices.Equal(t.Shape, p.shapes[i]) || len(t.F32) != prod(p.shapes[i]) {
			return fmt.Errorf("load params: tensor %q has shape %v, want %v", prefix+n, t.Shape, p.shapes[i])
		}
		if err := checkFinite(prefix+n, t.Shape, t.F32); err != nil {
			return fmt.Errorf("load params: %w", err)
		}
	}
	if strict {
		extra := []string{}
		for n := range tensors {
			if len(n) >= len(prefix) && n[:len(prefix)] == prefix && !p.Has(n[len(prefix):]) {
				extra = append(extra, n)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			return fmt.Errorf("load params: unexpected tensor %q (shape %v) is not a parameter of this config", extra[0], tensors[extra[0]].Shape)
		}
	}
	for i, n := range p.names {
		copy(p.slice(i), tensors[prefix+n].F32)
	}
	return nil
}

// LoadParams reads the weights of a file written by SaveParams or by the
// reference (the config from __metadata__ and every parameter, strictly:
// no missing, extra, mis-shaped, non-F32 or non-finite tensor), or of a
// training checkpoint written by Trainer.Save (which holds the weights:
// it is decoded and checked whole, as LoadCheckpoint does).
func LoadParams(path string) (*Params, error) {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return nil, err
	}
	if meta["format"] == CheckpointFormat {
		ck, err := decodeCheckpoint(ts, meta)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return ck.Params, nil
	}
	cfg, err := ConfigFromMetadata(meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p := ZeroParams(cfg)
	if err := p.LoadInto(ts, "", true); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Load reads the parameters of p's config from a parameter file or a
// training checkpoint (as LoadParams), strictly: a missing, extra,
// mis-shaped, non-F32 or non-finite tensor is an error naming it (p is
// unchanged then).
func (p *Params) Load(path string) error {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return err
	}
	if meta["format"] == CheckpointFormat {
		ck, err := decodeCheckpoint(ts, meta)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		ts = ck.Params.Tensors("")
	}
	if err := p.LoadInto(ts, "", true); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// SaveParams writes p as a safetensors checkpoint (atomically) with its
// config in __metadata__.
func (p *Params) SaveParams(path string) error {
	return safetensors.Write(path, p.Tensors(""), p.cfg.Metadata())
}
