package models

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// batchOf is B×T token ids of a vocabulary of V, deterministic.
func batchOf(B, T, V int) []int32 {
	idx := make([]int32, B*T)
	for i := range idx {
		idx[i] = int32((i*7 + i/T*3 + 1) % V)
	}
	return idx
}

// logitsOf runs one evaluation batch on p (built with opts) and returns
// its logits.
func logitsOf(t *testing.T, p *Params, idx []int32, B, T int, opts ...ModelOption) []float32 {
	t.Helper()
	m, err := NewModel(p.Config(), p, B, T, false, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Step(idx, nil); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(m.Logits())
}

// TestInt8ModelGolden: the int8 model's logits against the float32 model
// run on the dequantized weights (Q·scale): with the weight-only kernel
// the two compute the same products of the same float32 values, so they
// agree to float32 rounding (1e-5 absolute on logits of magnitude ~3);
// with the dynamic kernel the activations are quantized too, within a
// stated 1% (normwise; measured 0.2-0.4%). The negative control: the int8
// logits are at least 1e-4 (normwise) from the original float32 weights'
// (the weights were really quantized; measured 0.1-0.4%). The arena's
// logits equal the TapeMachine's bitwise. Every scheme, head float32 or
// int8.
func TestInt8ModelGolden(t *testing.T) {
	p, _ := trainedTiny(t)
	cfg := p.Config()
	B, T := 2, cfg.Block
	idx := batchOf(B, T, cfg.Vocab)
	ref := logitsOf(t, p, idx, B, T)
	for _, tc := range []struct {
		scheme precision.Int8Scheme
		head   bool
	}{{precision.Int8PerChannel, false}, {precision.Int8PerTensor, false}, {precision.Int8PerBlock32, false}, {precision.Int8PerChannel, true}} {
		q, err := Quantize(p, QuantizeOptions{Scheme: tc.scheme, Head: tc.head})
		if err != nil {
			t.Fatal(err)
		}
		deq := logitsOf(t, q.Dequantize(), idx, B, T)
		name := tc.scheme.String()
		if tc.head {
			name += "+head"
		}
		for _, k := range []Int8Kernel{Int8WeightOnly, Int8Dynamic} {
			got := logitsOf(t, q.Params(), idx, B, T, WithInt8(q, k))
			tape := logitsOf(t, q.Params(), idx, B, T, WithInt8(q, k), WithTapeMachine())
			if !slices.Equal(got, tape) {
				t.Errorf("%s %v: the arena's logits differ from the TapeMachine's by %g", name, k, testutil.MaxAbsDiff(got, tape))
			}
			t.Logf("%s %v: max |int8 − dequantized| %.3g, normwise %.3g; normwise from float32 %.3g", name, k, testutil.MaxAbsDiff(got, deq), relDiff(got, deq), relDiff(got, ref))
			switch d := testutil.MaxAbsDiff(got, deq); {
			case k == Int8WeightOnly && d > 1e-5:
				t.Errorf("%s weight-only: logits %g from the dequantized model's, want ≤ 1e-5 (float32 rounding)", name, d)
			case k == Int8Dynamic && relDiff(got, deq) > 0.01:
				t.Errorf("%s dynamic: logits %.3g (normwise) from the dequantized model's, want ≤ 1%%", name, relDiff(got, deq))
			}
			if r := relDiff(got, ref); r < 1e-4 {
				t.Errorf("%s %v: int8 logits %.3g (normwise) from the float32 model's: the weights were not quantized", name, k, r)
			}
		}
	}
}

// TestInt8DecoderEqualsModel: the KV-cached decoder of the int8 model
// (prefill, then one token at a time) gives the logits of the int8
// model's full window, as the float32 decoder does for its model.
func TestInt8DecoderEqualsModel(t *testing.T) {
	p, _ := trainedTiny(t)
	cfg := p.Config()
	q, err := Quantize(p, QuantizeOptions{Scheme: precision.Int8PerChannel})
	if err != nil {
		t.Fatal(err)
	}
	seq := batchOf(1, cfg.Block, cfg.Vocab)
	for _, k := range []Int8Kernel{Int8WeightOnly, Int8Dynamic} {
		full := logitsOf(t, q.Params(), seq, 1, cfg.Block, WithInt8(q, k))
		d, err := NewDecoder(q.Params(), 1, WithInt8(q, k))
		if err != nil {
			t.Fatal(err)
		}
		pre := 5
		got, err := d.Append(seq[:pre])
		if err != nil {
			t.Fatal(err)
		}
		all := slices.Clone(got)
		for _, tok := range seq[pre:] {
			step, err := d.Append([]int32{tok})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, step...)
		}
		d.Close()
		if diff := testutil.MaxAbsDiff(all, full); diff > 1e-5 {
			t.Errorf("%v: cached decoding's logits %g from the full window's, want ≤ 1e-5", k, diff)
		}
	}
}

// TestInt8ProgramHoldsInt8: the int8 model's program has the quantized
// matrices as int8 inputs, one byte an element, and no float32 input of a
// quantized matrix's size: its float32 inputs are exactly the float32
// part's parameters. The float32 model (the control) has no int8 input.
func TestInt8ProgramHoldsInt8(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 3)
	for _, head := range []bool{false, true} {
		q, err := Quantize(p, QuantizeOptions{Scheme: precision.Int8PerChannel, Head: head})
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewModel(cfg, q.Params(), 1, cfg.Block, false, WithInt8(q, Int8Dynamic))
		if err != nil {
			t.Fatal(err)
		}
		in := m.InputBytes()
		m.Close()
		var codes, scales int64
		for _, name := range q.Names() {
			codes += int64(len(q.Tensor(name).Packed().Packed()))
			scales += 4 * int64(len(q.Tensor(name).Scales))
		}
		if in[arena.Int8] != codes {
			t.Errorf("head %v: %d int8 input bytes, want %d (every packed code, one byte each)", head, in[arena.Int8], codes)
		}
		if want := 4*int64(q.Params().Count()) + scales; in[arena.F32] != want {
			t.Errorf("head %v: %d float32 input bytes, want %d (the float32 part and the scales)", head, in[arena.F32], want)
		}
	}
	m, err := NewModel(cfg, p, 1, cfg.Block, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if in := m.InputBytes(); in[arena.Int8] != 0 || in[arena.F32] != 4*int64(p.Count()) {
		t.Errorf("float32 model's inputs %v, want %d float32 bytes and no int8", in, 4*p.Count())
	}
}

// TestInt8Refuses: an int8 model is for inference on its own float32
// part, and that part alone is not a model.
func TestInt8Refuses(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 3)
	q, err := Quantize(p, QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fp16, _ := precision.ParsePolicy("bf16")
	for _, tc := range []struct {
		name  string
		p     *Params
		train bool
		opts  []ModelOption
	}{
		{"training", q.Params(), true, []ModelOption{WithInt8(q, Int8WeightOnly)}},
		{"16-bit policy", q.Params(), false, []ModelOption{WithInt8(q, Int8WeightOnly), WithPrecision(fp16)}},
		{"other params", p, false, []ModelOption{WithInt8(q, Int8WeightOnly)}},
		{"float32 part alone", q.Params(), false, nil},
		{"unknown kernel", q.Params(), false, []ModelOption{WithInt8(q, Int8Kernel(9))}},
	} {
		if _, err := NewModel(cfg, tc.p, 1, 4, tc.train, tc.opts...); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: NewModel = %v, want ErrConfig", tc.name, err)
		}
	}
	if _, err := NewDecoder(q.Params(), 1); err != nil {
		t.Fatal(err) // the decoder compiles on first use
	} else if d, _ := NewDecoder(q.Params(), 1); d != nil {
		if _, err := d.Append([]int32{1}); !errors.Is(err, ErrConfig) {
			t.Errorf("decoder on the float32 part alone: %v, want ErrConfig", err)
		}
	}
	// control: the same model with its options builds.
	if m, err := NewModel(cfg, q.Params(), 1, 4, false, WithInt8(q, Int8WeightOnly)); err != nil {
		t.Errorf("control: %v", err)
	} else {
		m.Close()
	}
}

// TestQuantizeRefusesNonFinite: a NaN weight is refused, naming the
// tensor and the element.
func TestQuantizeRefusesNonFinite(t *testing.T) {
	cfg, _ := Preset("tiny")
	p := NewParams(cfg, 3)
	name := "transformer.h.1.mlp.c_fc.weight"
	p.Slice(name)[5*cfg.Embd+7] = float32(math.Inf(-1))
	_, err := Quantize(p, QuantizeOptions{})
	if !errors.Is(err, precision.ErrNonFinite) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "(5, 7)") {
		t.Errorf("Quantize = %v, want ErrNonFinite naming %s at (5, 7)", err, name)
	}
}

// TestQuantizedBytes: the int8 model's linear weights are their codes and
// scales; a per-channel model of baby is over 3.85x smaller there.
func TestQuantizedBytes(t *testing.T) {
	cfg, _ := Preset("baby")
	p := NewParams(cfg, 1)
	for _, tc := range []struct {
		scheme precision.Int8Scheme
		min    float64
	}{{precision.Int8PerChannel, 3.85}, {precision.Int8PerTensor, 3.99}, {precision.Int8PerBlock32, 3.5}} {
		q, err := Quantize(p, QuantizeOptions{Scheme: tc.scheme})
		if err != nil {
			t.Fatal(err)
		}
		f, i := p.Bytes(), q.Bytes()
		var want int64
		for _, n := range q.Names() {
			tn := q.Tensor(n)
			want += int64(tn.Rows*tn.Cols) + 4*int64(tc.scheme.NumScales(tn.Rows, tn.Cols))
		}
		if i.Linear != want || i.Rest != f.Rest || i.Head != f.Head {
			t.Errorf("%v: bytes %+v, want linear %d and the rest as float32's %+v", tc.scheme, i, want, f)
		}
		if r := float64(f.Linear) / float64(i.Linear); r < tc.min {
			t.Errorf("%v: linear weights %.3fx smaller, want ≥ %.2f", tc.scheme, r, tc.min)
		}
	}
}
