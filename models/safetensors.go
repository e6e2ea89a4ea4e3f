package models

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"gptlab/reports"
)

// Tensor is one safetensors entry. Float data is held as float32 (dtype
// "F32"); integer data ("I64" or "I32") as int64.
type Tensor struct {
	DType string    // "F32", "I64" or "I32"
	Shape []int     // row-major; [] is a scalar
	F32   []float32 // the values when DType is "F32"
	Ints  []int64   // the values when DType is "I64" or "I32"
}

// F32Tensor makes an F32 tensor (data is not copied).
func F32Tensor(shape []int, data []float32) Tensor {
	return Tensor{DType: "F32", Shape: append([]int(nil), shape...), F32: data}
}

// IntTensor makes an I64 or I32 tensor (data is not copied).
func IntTensor(dtype string, shape []int, data []int64) Tensor {
	return Tensor{DType: dtype, Shape: append([]int(nil), shape...), Ints: data}
}

// ErrSafetensors marks a malformed safetensors file.
var ErrSafetensors = errors.New("malformed safetensors")

// maxHeader bounds the JSON header (the format's own limit is 100 MB).
const maxHeader = 100 << 20

func dtypeSize(dt string) int {
	switch dt {
	case "F32", "I32":
		return 4
	case "I64":
		return 8
	}
	return 0
}

// Len is the number of elements the shape holds.
func (t Tensor) Len() int { return prod(t.Shape) }

type stEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// DecodeSafetensors parses a whole safetensors file held in memory. Every
// length, offset and shape is checked against the data, so a malformed
// file gives an error, never a panic.
func DecodeSafetensors(b []byte) (map[string]Tensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrSafetensors, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("%w: header length %d exceeds the file (%d bytes) or 100 MB", ErrSafetensors, n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrSafetensors, err)
	}
	data := b[8+n:]
	tensors := map[string]Tensor{}
	var meta map[string]string
	type span struct {
		lo, hi int64
		name   string
	}
	var spans []span
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, nil, fmt.Errorf("%w: __metadata__: %v", ErrSafetensors, err)
			}
			continue
		}
		var e stEntry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("%w: tensor %q: %v", ErrSafetensors, name, err)
		}
		size := dtypeSize(e.DType)
		if size == 0 {
			return nil, nil, fmt.Errorf("%w: tensor %q: dtype %q not supported (want F32, I64 or I32)", ErrSafetensors, name, e.DType)
		}
		if len(e.Offsets) != 2 {
			return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets %v, want [begin, end]", ErrSafetensors, name, e.Offsets)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32/int64(d)) {
				return nil, nil, fmt.Errorf("%w: tensor %q: shape %v invalid or too large", ErrSafetensors, name, e.Shape)
			}
			count *= int64(d)
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) {
			return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] outside the %d data bytes", ErrSafetensors, name, lo, hi, len(data))
		}
		if hi-lo != count*int64(size) {
			return nil, nil, fmt.Errorf("%w: tensor %q: %d bytes for shape %v of %s (want %d)", ErrSafetensors, name, hi-lo, e.Shape, e.DType, count*int64(size))
		}
		spans = append(spans, span{lo, hi, name})
		t := Tensor{DType: e.DType, Shape: append([]int{}, e.Shape...)}
		buf := data[lo:hi]
		switch e.DType {
		case "F32":
			t.F32 = make([]float32, count)
			for i := range t.F32 {
				t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
			}
		case "I32":
			t.Ints = make([]int64, count)
			for i := range t.Ints {
				t.Ints[i] = int64(int32(binary.LittleEndian.Uint32(buf[4*i:])))
			}
		case "I64":
			t.Ints = make([]int64, count)
			for i := range t.Ints {
				t.Ints[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
			}
		}
		tensors[name] = t
	}
	sort.Slice(spans, func(i, j int) bool {
		return spans[i].lo < spans[j].lo || (spans[i].lo == spans[j].lo && spans[i].hi < spans[j].hi)
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return nil, nil, fmt.Errorf("%w: tensors %q and %q overlap", ErrSafetensors, spans[i-1].name, spans[i].name)
		}
	}
	return tensors, meta, nil
}

// ReadSafetensors reads a safetensors file: its tensors by name and its
// __metadata__ (nil when absent).
func ReadSafetensors(path string) (map[string]Tensor, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	ts, meta, err := DecodeSafetensors(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, meta, nil
}

// EncodeSafetensors writes tensors (in name order) and meta in the
// safetensors layout; the header is padded with spaces to 8 bytes.
func EncodeSafetensors(w io.Writer, tensors map[string]Tensor, meta map[string]string) error {
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		if n == "__metadata__" {
			return fmt.Errorf("encode safetensors: %q is reserved", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var off int64
	for _, n := range names {
		t := tensors[n]
		size := dtypeSize(t.DType)
		if size == 0 {
			return fmt.Errorf("encode safetensors: tensor %q: dtype %q not supported", n, t.DType)
		}
		have := len(t.F32)
		if t.DType != "F32" {
			have = len(t.Ints)
		}
		if have != t.Len() {
			return fmt.Errorf("encode safetensors: tensor %q: %d values for shape %v", n, have, t.Shape)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		nb := int64(t.Len() * size)
		header[n] = stEntry{DType: t.DType, Shape: shape, Offsets: []int64{off, off + nb}}
		off += nb
	}
	if meta != nil {
		header["__metadata__"] = meta
	}
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode safetensors: %w", err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	buf := make([]byte, 8, 8+len(h)+int(off))
	binary.LittleEndian.PutUint64(buf, uint64(len(h)))
	buf = append(buf, h...)
	for _, n := range names {
		t := tensors[n]
		switch t.DType {
		case "F32":
			for _, v := range t.F32 {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			}
		case "I32":
			for _, v := range t.Ints {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(int32(v)))
			}
		case "I64":
			for _, v := range t.Ints {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// WriteSafetensors writes a safetensors file atomically (temporary file,
// then rename).
func WriteSafetensors(path string, tensors map[string]Tensor, meta map[string]string) error {
	return reports.WriteFileAtomic(path, reports.WriterFunc(func(w io.Writer) error {
		return EncodeSafetensors(w, tensors, meta)
	}))
}

// Tensors returns every parameter as an F32 Tensor sharing p's memory,
// under prefix+name.
func (p *Params) Tensors(prefix string) map[string]Tensor {
	out := make(map[string]Tensor, len(p.names))
	for i, n := range p.names {
		out[prefix+n] = F32Tensor(p.shapes[i], p.slice(i))
	}
	return out
}

// LoadInto copies the tensors named prefix+name into p. A missing or extra
// tensor (when strict, every tensor under prefix must be a parameter), a
// wrong dtype or a wrong shape is an error naming the tensor and both
// shapes.
func (p *Params) LoadInto(tensors map[string]Tensor, prefix string, strict bool) error {
	for i, n := range p.names {
		t, ok := tensors[prefix+n]
		if !ok {
			return fmt.Errorf("load params: tensor %q missing (want shape %v)", prefix+n, p.shapes[i])
		}
		if t.DType != "F32" {
			return fmt.Errorf("load params: tensor %q has dtype %s shape %v, want F32 shape %v", prefix+n, t.DType, t.Shape, p.shapes[i])
		}
		if !equalInts(t.Shape, p.shapes[i]) || len(t.F32) != prod(p.shapes[i]) {
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

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// LoadParams reads a checkpoint written by SaveParams or by the reference:
// the config from __metadata__ and every parameter, strictly (no missing,
// extra, mis-shaped or non-F32 tensor).
func LoadParams(path string) (*Params, error) {
	ts, meta, err := ReadSafetensors(path)
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
	ts, _, err := ReadSafetensors(path)
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
	return WriteSafetensors(path, p.Tensors(""), p.cfg.Metadata())
}
