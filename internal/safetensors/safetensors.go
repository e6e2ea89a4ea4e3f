// Package safetensors reads and writes the safetensors format
// (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// span, an optional string-to-string __metadata__, then the raw data.
//
// It owns the format: header parsing and its limits, the dtypes gptlab
// uses (F32, I64, I32, and I8 for quantized weights), and the checks that make a malformed file an error
// rather than a panic (its fuzz target is FuzzReadSafetensors). It knows nothing of
// models, parameters or checkpoints: those live in package models, built
// on this one. Files are written atomically (internal/atomicfile).
package safetensors

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

	"gptlab/internal/atomicfile"
)

// Tensor is one safetensors entry. Float data is held as float32 (dtype
// "F32"); integer data ("I64" or "I32") as int64; 8-bit integers ("I8",
// quantized weights) as int8, one byte each as in the file.
type Tensor struct {
	DType string    // "F32", "I64", "I32" or "I8"
	Shape []int     // row-major; [] is a scalar
	F32   []float32 // the values when DType is "F32"
	Ints  []int64   // the values when DType is "I64" or "I32"
	I8    []int8    // the values when DType is "I8"
}

// F32 makes an F32 tensor (data is not copied).
func F32(shape []int, data []float32) Tensor {
	return Tensor{DType: "F32", Shape: append([]int(nil), shape...), F32: data}
}

// Int makes an I64 or I32 tensor (data is not copied).
func Int(dtype string, shape []int, data []int64) Tensor {
	return Tensor{DType: dtype, Shape: append([]int(nil), shape...), Ints: data}
}

// I8 makes an I8 tensor (data is not copied).
func I8(shape []int, data []int8) Tensor {
	return Tensor{DType: "I8", Shape: append([]int(nil), shape...), I8: data}
}

// ErrMalformed marks a malformed safetensors file.
var ErrMalformed = errors.New("malformed safetensors")

// maxHeader bounds the JSON header (the format's own limit is 100 MB).
const maxHeader = 100 << 20

func dtypeSize(dt string) int {
	switch dt {
	case "F32", "I32":
		return 4
	case "I64":
		return 8
	case "I8":
		return 1
	}
	return 0
}

// values is the number of values t holds in the slice of its dtype.
func (t Tensor) values() int {
	switch t.DType {
	case "F32":
		return len(t.F32)
	case "I8":
		return len(t.I8)
	}
	return len(t.Ints)
}

// Len is the number of elements the shape holds.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

type entry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// Decode parses a whole safetensors file held in memory: its tensors by
// name and its __metadata__ (nil when absent). Every length, offset and
// shape is checked against the data, so a malformed file gives an error
// wrapping ErrMalformed, never a panic.
func Decode(b []byte) (map[string]Tensor, map[string]string, error) {
	if len(b) < 8 {
		return nil, nil, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrMalformed, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, nil, fmt.Errorf("%w: header length %d exceeds the file (%d bytes) or 100 MB", ErrMalformed, n, len(b))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
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
				return nil, nil, fmt.Errorf("%w: __metadata__: %v", ErrMalformed, err)
			}
			continue
		}
		var e entry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("%w: tensor %q: %v", ErrMalformed, name, err)
		}
		size := dtypeSize(e.DType)
		if size == 0 {
			return nil, nil, fmt.Errorf("%w: tensor %q: dtype %q not supported (want F32, I64, I32 or I8)", ErrMalformed, name, e.DType)
		}
		if len(e.Offsets) != 2 {
			return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets %v, want [begin, end]", ErrMalformed, name, e.Offsets)
		}
		count := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && count > math.MaxInt32/int64(d)) {
				return nil, nil, fmt.Errorf("%w: tensor %q: shape %v invalid or too large", ErrMalformed, name, e.Shape)
			}
			count *= int64(d)
		}
		lo, hi := e.Offsets[0], e.Offsets[1]
		if lo < 0 || hi < lo || hi > int64(len(data)) {
			return nil, nil, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] outside the %d data bytes", ErrMalformed, name, lo, hi, len(data))
		}
		if hi-lo != count*int64(size) {
			return nil, nil, fmt.Errorf("%w: tensor %q: %d bytes for shape %v of %s (want %d)", ErrMalformed, name, hi-lo, e.Shape, e.DType, count*int64(size))
		}
		spans = append(spans, span{lo, hi, name})
		tensors[name] = decodeData(e, count, data[lo:hi])
	}
	sort.Slice(spans, func(i, j int) bool {
		return spans[i].lo < spans[j].lo || (spans[i].lo == spans[j].lo && spans[i].hi < spans[j].hi)
	})
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return nil, nil, fmt.Errorf("%w: tensors %q and %q overlap", ErrMalformed, spans[i-1].name, spans[i].name)
		}
	}
	return tensors, meta, nil
}

// decodeData converts the count little-endian values in buf (already
// checked to be count times the dtype's size) to a Tensor.
func decodeData(e entry, count int64, buf []byte) Tensor {
	t := Tensor{DType: e.DType, Shape: append([]int{}, e.Shape...)}
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
	case "I8":
		t.I8 = make([]int8, count)
		for i, b := range buf {
			t.I8[i] = int8(b)
		}
	}
	return t
}

// Read reads a safetensors file: its tensors by name and its __metadata__
// (nil when absent). A decoding error names the file.
func Read(path string) (map[string]Tensor, map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	ts, meta, err := Decode(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return ts, meta, nil
}

// Encode writes tensors (in name order) and meta in the safetensors
// layout; the header is padded with spaces to a multiple of 8 bytes.
func Encode(w io.Writer, tensors map[string]Tensor, meta map[string]string) error {
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
		if have := t.values(); have != t.Len() {
			return fmt.Errorf("encode safetensors: tensor %q: %d values for shape %v", n, t.values(), t.Shape)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		nb := int64(t.Len() * size)
		header[n] = entry{DType: t.DType, Shape: shape, Offsets: []int64{off, off + nb}}
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
		case "I8":
			for _, v := range t.I8 {
				buf = append(buf, byte(v))
			}
		}
	}
	_, err = w.Write(buf)
	return err
}

// Write writes a safetensors file atomically (temporary file, then
// rename).
func Write(path string, tensors map[string]Tensor, meta map[string]string) error {
	return atomicfile.Write(path, atomicfile.WriterFunc(func(w io.Writer) error {
		return Encode(w, tensors, meta)
	}))
}
