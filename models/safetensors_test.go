package models

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSafetensorsRoundTrip(t *testing.T) {
	in := map[string]Tensor{
		"w":   F32Tensor([]int{2, 3}, []float32{1, -2, 3.5, 0, 1e-30, -7}),
		"i64": IntTensor("I64", []int{2, 2}, []int64{0, 1, -5, 1 << 40}),
		"i32": IntTensor("I32", []int{3}, []int64{7, -1, 64}),
		"s":   F32Tensor([]int{}, []float32{42}),
	}
	meta := map[string]string{"n_layer": "2"}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteSafetensors(path, in, meta); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	out, gotMeta, err := ReadSafetensors(path)
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
		if got.DType != want.DType || !equalInts(got.Shape, want.Shape) {
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
	}
}

// header builds a file from a literal JSON header and n data bytes.
func header(js string, n int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	b = append(b, js...)
	return append(b, make([]byte, n)...)
}

func TestDecodeSafetensorsRejects(t *testing.T) {
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
		{"bad metadata", string(header(`{"__metadata__":{"a":1}}`, 0)), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeSafetensors([]byte(tc.file))
			if err == nil || !errors.Is(err, ErrSafetensors) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("DecodeSafetensors = %v, want an ErrSafetensors mentioning %q", err, tc.want)
			}
		})
	}
	// control: a well-formed header of the same kind decodes.
	if _, _, err := DecodeSafetensors(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 8)); err != nil {
		t.Errorf("well-formed file: %v", err)
	}
}

func TestLoadParamsErrors(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 1)
	const name = "transformer.h.1.mlp.c_fc.weight"
	for _, tc := range []struct {
		name   string
		mutate func(map[string]Tensor)
		want   []string
	}{
		{"missing", func(m map[string]Tensor) { delete(m, name) }, []string{name, "missing", "[128 32]"}},
		{"extra", func(m map[string]Tensor) { m["lm_head.weight"] = F32Tensor([]int{1}, []float32{0}) }, []string{"lm_head.weight", "[1]"}},
		{"wrong shape", func(m map[string]Tensor) { m[name] = F32Tensor([]int{32, 128}, make([]float32, 4096)) }, []string{name, "[32 128]", "[128 32]"}},
		{"wrong dtype", func(m map[string]Tensor) { m[name] = IntTensor("I64", []int{128, 32}, make([]int64, 4096)) }, []string{name, "I64", "F32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := p.Tensors("")
			tc.mutate(ts)
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := WriteSafetensors(path, ts, cfg.Metadata()); err != nil {
				t.Fatal(err)
			}
			_, err := LoadParams(path)
			if err == nil {
				t.Fatalf("LoadParams succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("LoadParams error %q does not mention %q", err, w)
				}
			}
		})
	}
	// a checkpoint of another config fails to load into these params.
	other := cfg
	other.Layers = 3
	path3 := filepath.Join(t.TempDir(), "l3.safetensors")
	if err := NewParams(other, 1).SaveParams(path3); err != nil {
		t.Fatal(err)
	}
	if err := p.Clone().Load(path3); err == nil || !strings.Contains(err.Error(), "transformer.h.2.") {
		t.Errorf("loading a 3-layer checkpoint into 2-layer params: %v, want an error naming a layer-2 tensor", err)
	}
	// control: the unmodified checkpoint loads and is equal.
	path := filepath.Join(t.TempDir(), "ok.safetensors")
	if err := p.SaveParams(path); err != nil {
		t.Fatal(err)
	}
	q, err := LoadParams(path)
	if err != nil {
		t.Fatal(err)
	}
	if maxAbsDiff(q.Data(), p.Data()) != 0 || q.Config() != cfg {
		t.Errorf("round trip changed the parameters or config (%+v vs %+v)", q.Config(), cfg)
	}
}

func FuzzReadSafetensors(f *testing.F) {
	var buf bytes.Buffer
	_ = EncodeSafetensors(&buf, map[string]Tensor{
		"a": F32Tensor([]int{2}, []float32{1, 2}),
		"b": IntTensor("I32", []int{1}, []int64{3}),
	}, map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(header(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Add(header(`{"a":{"dtype":"F32","shape":[1000000000,1000000000],"data_offsets":[0,8]}}`, 8))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, _, err := DecodeSafetensors(b)
		if err != nil {
			return
		}
		for name, x := range ts {
			n := len(x.F32) + len(x.Ints)
			if n != x.Len() {
				t.Errorf("tensor %q: %d values for shape %v", name, n, x.Shape)
			}
		}
	})
}
