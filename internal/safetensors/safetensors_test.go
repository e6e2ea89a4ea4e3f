package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	in := map[string]Tensor{
		"w":   F32([]int{2, 3}, []float32{1, -2, 3.5, 0, 1e-30, -7}),
		"i64": Int("I64", []int{2, 2}, []int64{0, 1, -5, 1 << 40}),
		"i32": Int("I32", []int{3}, []int64{7, -1, 64}),
		"s":   F32([]int{}, []float32{42}),
		"q":   I8([]int{2, 3}, []int8{-127, -1, 0, 1, 127, -128}),
	}
	meta := map[string]string{"n_layer": "2"}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := Write(path, in, meta); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	out, gotMeta, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if gotMeta["n_layer"] != "2" {
		t.Errorf("metadata n_layer = %q, want \"2\"", gotMeta["n_layer"])
	}
	for name, want := range in {
		got, ok := out[name]
		if !ok {
			t.Errorf("tensor %q lost", name)
			continue
		}
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) {
			t.Errorf("tensor %q: %s %v, want %s %v", name, got.DType, got.Shape, want.DType, want.Shape)
		}
		for i := range want.F32 {
			if got.F32[i] != want.F32[i] {
				t.Errorf("tensor %q[%d] = %v, want %v", name, i, got.F32[i], want.F32[i])
			}
		}
		for i := range want.Ints {
			if got.Ints[i] != want.Ints[i] {
				t.Errorf("tensor %q[%d] = %v, want %v", name, i, got.Ints[i], want.Ints[i])
			}
		}
		if !slices.Equal(got.I8, want.I8) {
			t.Errorf("tensor %q = %v, want %v", name, got.I8, want.I8)
		}
	}
}

// header builds a file from a literal JSON header and n data bytes.
func header(js string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, make([]byte, n)...)
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"short", "abc", "shorter than"},
		{"header past the end", string(binary.LittleEndian.AppendUint64(nil, 1000)) + "{}", "exceeds"},
		{"bad json", string(header(`{"a":`, 0)), "header"},
		{"unknown dtype", string(header(`{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, 2)), "not supported"},
		{"offsets past data", string(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4)), "outside"},
		{"size mismatch", string(header(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8)), "bytes for shape"},
		{"negative dim", string(header(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, 0)), "shape"},
		{"reversed offsets", string(header(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4)), "outside"},
		{"overlap", string(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8)), "overlap"},
		{"I8 size mismatch", string(header(`{"a":{"dtype":"I8","shape":[2,3],"data_offsets":[0,5]}}`, 8)), "bytes for shape"},
		{"bad metadata", string(header(`{"__metadata__":{"a":1}}`, 0)), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode([]byte(tc.file))
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode = %v, want an ErrMalformed mentioning %q", err, tc.want)
			}
		})
	}
	// control: a well-formed header of the same kind decodes.
	if _, _, err := Decode(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)); err != nil {
		t.Errorf("well-formed file: %v", err)
	}
}

func FuzzReadSafetensors(f *testing.F) {
	var buf bytes.Buffer
	_ = Encode(&buf, map[string]Tensor{
		"a": F32([]int{2}, []float32{1, 2}),
		"b": Int("I32", []int{1}, []int64{3}),
		"q": I8([]int{2, 2}, []int8{-127, 0, 5, 127}),
	}, map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(header(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Add(header(`{"a":{"dtype":"F32","shape":[1000000000,1000000000],"data_offsets":[0,8]}}`, 8))
	f.Add(header(`{"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3]}}`, 3))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, _, err := Decode(b)
		if err != nil {
			return
		}
		for name, x := range ts {
			n := len(x.F32) + len(x.Ints) + len(x.I8)
			if n != x.Len() {
				t.Errorf("tensor %q: %d values for shape %v", name, n, x.Shape)
			}
		}
	})
}
