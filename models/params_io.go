package models

import (
	"fmt"
	"slices"
	"sort"

	"gptlab/internal/safetensors"
)

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
// shapes.
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

// LoadParams reads a checkpoint written by SaveParams or by the reference:
// the config from __metadata__ and every parameter, strictly (no missing,
// extra, mis-shaped or non-F32 tensor).
func LoadParams(path string) (*Params, error) {
	ts, meta, err := safetensors.Read(path)
	if err != nil {
		return nil, err
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

// Load reads the parameters of p's config from a checkpoint, strictly: a
// missing, extra, mis-shaped or non-F32 tensor is an error naming it and
// both shapes (p is unchanged then).
func (p *Params) Load(path string) error {
	ts, _, err := safetensors.Read(path)
	if err != nil {
		return err
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
