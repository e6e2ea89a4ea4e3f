package precision

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestInt8SchemeNames(t *testing.T) {
	for _, s := range []Int8Scheme{Int8PerChannel, Int8PerTensor, Int8PerBlock32} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Int8Scheme
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%v: round trip gave %v, %v", s, back, err)
		}
	}
	var s Int8Scheme
	err := s.UnmarshalText([]byte("row"))
	if !errors.Is(err, ErrUnknownInt8Scheme) || !strings.Contains(err.Error(), "channel, tensor, block32") {
		t.Errorf("unknown scheme: %v", err)
	}
	if _, err := Int8Scheme(7).MarshalText(); err == nil {
		t.Error("invalid scheme marshalled")
	}
}

// TestRoundInt8 checks the element rule at the halfway points (ties to
// even, both signs), at ±127·scale and beyond (clamped, never -128).
func TestRoundInt8(t *testing.T) {
	const s = 0.125 // a power of two: (k+0.5)·s and x/s are exact
	tests := []struct {
		x    float32
		want int8
	}{
		{0.5 * s, 0}, {1.5 * s, 2}, {2.5 * s, 2}, {3.5 * s, 4}, {62.5 * s, 62}, {125.5 * s, 126}, {126.5 * s, 126},
		{-0.5 * s, 0}, {-1.5 * s, -2}, {-2.5 * s, -2}, {-3.5 * s, -4}, {-125.5 * s, -126}, {-126.5 * s, -126},
		{0.49 * s, 0}, {0.51 * s, 1}, {-0.51 * s, -1},
		{127 * s, 127}, {-127 * s, -127}, {127.5 * s, 127}, {-127.5 * s, -127}, {128 * s, 127}, {-128 * s, -127},
		{3e38, 127}, {-3e38, -127},
	}
	for _, tc := range tests {
		if got := RoundInt8(tc.x, s); got != tc.want {
			t.Errorf("RoundInt8(%g·s) = %d, want %d", tc.x/s, got, tc.want)
		}
	}
}

// TestQuantizeInt8Halfway quantizes rows whose max is 127·2^-3 (so the
// scale is exactly 2^-3) holding the halfway points.
func TestQuantizeInt8Halfway(t *testing.T) {
	const s = 0.125
	row := []float32{127 * s, -127 * s, 0.5 * s, 1.5 * s, 2.5 * s, -0.5 * s, -1.5 * s, -2.5 * s, 100.5 * s, -101.5 * s}
	want := []int8{127, -127, 0, 2, 2, 0, -2, -2, 100, -102}
	for _, sc := range []Int8Scheme{Int8PerChannel, Int8PerTensor, Int8PerBlock32} {
		q, scales, err := QuantizeInt8("w", row, 1, len(row), sc)
		if err != nil {
			t.Fatal(err)
		}
		if scales[0] != s {
			t.Fatalf("%v: scale %g, want %g", sc, scales[0], s)
		}
		for i := range want {
			if q[i] != want[i] {
				t.Errorf("%v: q[%d] (x = %g·s) = %d, want %d", sc, i, row[i]/s, q[i], want[i])
			}
		}
	}
}

func TestQuantizeInt8ZeroAndTiny(t *testing.T) {
	tiny := float32(math.SmallestNonzeroFloat32)
	w := []float32{
		0, 0, 0, 0, // an all-zero channel
		5 * tiny, -3 * tiny, tiny, 0, // max/127 underflows: scale 2^-149, exact
		1e-40, -3e-41, 7e-42, 0, // subnormal values, subnormal scale
		1e-30, -2e-31, 1e-45, 0, // tiny normal values
	}
	q, scales, err := QuantizeInt8("w", w, 4, 4, Int8PerChannel)
	if err != nil {
		t.Fatal(err)
	}
	if scales[0] != 0 || scales[1] != tiny {
		t.Errorf("scales %g, want 0 and 2^-149 first", scales)
	}
	back := make([]float32, len(w))
	DequantizeInt8(back, q, scales, 4, 4, Int8PerChannel)
	for i, v := range back {
		if !isFinite32(v) {
			t.Fatalf("dequantized[%d] = %g", i, v)
		}
		if i < 8 && v != w[i] {
			t.Errorf("dequantized[%d] = %g, want exactly %g", i, v, w[i])
		}
		if math.Signbit(float64(v)) && v == 0 {
			t.Errorf("dequantized[%d] is -0", i)
		}
	}
	for r := 2; r < 4; r++ {
		checkErrorBound(t, w[r*4:r*4+4], q[r*4:r*4+4], scales[r])
	}
}

// checkErrorBound checks |q·s - x| ≤ s/2 (with the rounding of x/s) for
// the elements whose quotient was not clamped, and |q| ≤ 127.
func checkErrorBound(t *testing.T, x []float32, q []int8, s float32) {
	t.Helper()
	for i, v := range x {
		if q[i] < -Int8Max || q[i] > Int8Max {
			t.Fatalf("q[%d] = %d out of range", i, q[i])
		}
		if s == 0 {
			if q[i] != 0 || v != 0 {
				t.Fatalf("zero scale with x %g, q %d", v, q[i])
			}
			continue
		}
		if math.Abs(float64(v/s)) > 127.5 {
			continue // clamped
		}
		e := math.Abs(float64(q[i])*float64(s) - float64(v))
		if e > float64(s)*(0.5+1e-5) {
			t.Fatalf("x %g, scale %g: q %d, error %g > scale/2", v, s, q[i], e)
		}
	}
}

func TestQuantizeInt8NonFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		w := make([]float32, 12)
		w[1*4+2] = bad
		for _, sc := range []Int8Scheme{Int8PerChannel, Int8PerTensor, Int8PerBlock32} {
			_, _, err := QuantizeInt8("h.0.mlp.c_fc.weight", w, 3, 4, sc)
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "h.0.mlp.c_fc.weight") || !strings.Contains(err.Error(), "(1, 2)") {
				t.Errorf("%v %g: %v", sc, bad, err)
			}
		}
	}
}

func TestQuantizeInt8Blocks(t *testing.T) {
	// 70 columns: blocks of 32, 32 and a short one of 6.
	const rows, cols = 3, 70
	w := randMatrix(rand.New(rand.NewPCG(1, 2)), rows, cols)
	w[1*cols+65] = 9 // an outlier in the short block of row 1
	q, scales, err := QuantizeInt8("w", w, rows, cols, Int8PerBlock32)
	if err != nil {
		t.Fatal(err)
	}
	if len(scales) != rows*3 {
		t.Fatalf("%d scales", len(scales))
	}
	if scales[1*3+2] != Int8Scale(9) {
		t.Errorf("short block scale %g, want %g", scales[5], Int8Scale(9))
	}
	for j := range rows {
		for b := range 3 {
			lo, hi := j*cols+b*32, j*cols+min((b+1)*32, cols)
			checkErrorBound(t, w[lo:hi], q[lo:hi], scales[j*3+b])
		}
	}
}

func randMatrix(r *rand.Rand, rows, cols int) []float32 {
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(r.NormFloat64() * 0.02 * float64(1+i/cols))
	}
	return w
}

// TestInt8SchemesQuality: on rows of different magnitudes, per-tensor is
// worse than per-channel, and block32 at least as good as per-channel; one
// outlier costs its channel many dB and leaves the others alone.
func TestInt8SchemesQuality(t *testing.T) {
	const rows, cols = 16, 256
	w := randMatrix(rand.New(rand.NewPCG(3, 4)), rows, cols)
	sq := map[Int8Scheme]float64{}
	for _, sc := range []Int8Scheme{Int8PerChannel, Int8PerTensor, Int8PerBlock32} {
		sq[sc] = SQNR(w, roundTrip(t, w, rows, cols, sc))
	}
	if !(sq[Int8PerTensor] < sq[Int8PerChannel]-1) || sq[Int8PerBlock32] < sq[Int8PerChannel] {
		t.Errorf("SQNR dB: %v", sq)
	}
	// Per-channel SQNR of a uniform-ish channel is about 6.02·8 dB less
	// the crest factor: it sits between 30 and 50 dB here.
	before := SQNRRows(w, roundTrip(t, w, rows, cols, Int8PerChannel), rows, cols)
	out := append([]float32(nil), w...)
	out[5*cols+17] = 50 * w[5*cols+17] / float32(math.Abs(float64(w[5*cols+17])))
	after := SQNRRows(out, roundTrip(t, out, rows, cols, Int8PerChannel), rows, cols)
	// The cost to the rest of channel 5: SQNR of the channel without the
	// outlier's element.
	rest := func(x []float32) []float32 {
		r := append([]float32(nil), x[5*cols:5*cols+17]...)
		return append(r, x[5*cols+18:6*cols]...)
	}
	withOut := roundTrip(t, out, rows, cols, Int8PerChannel)
	restDB := SQNR(rest(out), rest(withOut))
	if before[5] < 30 || restDB > before[5]-20 {
		t.Errorf("channel 5: %.1f dB before, rest of it %.1f dB with the outlier", before[5], restDB)
	}
	for j := range rows {
		if j != 5 && after[j] != before[j] {
			t.Errorf("channel %d changed: %.2f -> %.2f dB", j, before[j], after[j])
		}
	}
	if got := SQNR(w, w); !math.IsInf(got, 1) {
		t.Errorf("SQNR of exact = %g", got)
	}
}

func roundTrip(t *testing.T, w []float32, rows, cols int, sc Int8Scheme) []float32 {
	t.Helper()
	q, s, err := QuantizeInt8("w", w, rows, cols, sc)
	if err != nil {
		t.Fatal(err)
	}
	back := make([]float32, len(w))
	DequantizeInt8(back, q, s, rows, cols, sc)
	return back
}

func TestQuantizeInt8Vector(t *testing.T) {
	x := []float32{1, -2, 0.5, 127}
	q := make([]int8, 4)
	if s := QuantizeInt8Vector(q, x); s != 1 || q[1] != -2 || q[2] != 0 || q[3] != 127 {
		t.Errorf("scale %g, q %v", s, q)
	}
	x[2] = float32(math.Inf(-1))
	if s := QuantizeInt8Vector(q, x); !math.IsNaN(float64(s)) || q[0] != 0 {
		t.Errorf("non-finite row: scale %g, q %v", s, q)
	}
	if s := QuantizeInt8Vector(q, make([]float32, 4)); s != 0 || q[0] != 0 {
		t.Errorf("zero row: scale %g, q %v", s, q)
	}
}

func TestValidateInt8(t *testing.T) {
	q := make([]int8, 6)
	tests := []struct {
		name   string
		q      []int8
		scales []float32
		want   string
	}{
		{"ok", q, []float32{1, 0}, ""},
		{"short q", q[:5], []float32{1, 0}, "5 codes"},
		{"missing scale", q, []float32{1}, "1 scales, want 2"},
		{"NaN scale", q, []float32{1, float32(math.NaN())}, "scale 1"},
		{"negative scale", q, []float32{-1, 1}, "negative"},
		{"-128", []int8{0, 0, 0, 0, -128, 0}, []float32{1, 1}, "(1, 1)"},
	}
	for _, tc := range tests {
		err := ValidateInt8("wq", tc.q, tc.scales, 2, 3, Int8PerChannel)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "wq") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzQuantizeInt8: finite in gives no NaN/Inf out, codes in [-127, 127],
// and an error of at most scale/2 for the elements not clamped.
func FuzzQuantizeInt8(f *testing.F) {
	enc := func(cols byte, scheme byte, xs ...float32) []byte {
		b := []byte{cols, scheme}
		for _, x := range xs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	f.Add(enc(4, 0, 1, -2, 3.5, 0, 0, 0, 0, 0))
	f.Add(enc(3, 1, 3e38, -3e38, 1e-45, 5e-324, 1, 2))
	f.Add(enc(33, 2, 0.5, 1.5, -2.5, 127, 127.5, -127.5))
	f.Add(enc(1, 0, float32(math.NaN()), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 {
			return
		}
		cols := int(data[0]%64) + 1
		sc := Int8Scheme(data[1] % 3)
		var w []float32
		for b := data[2:]; len(b) >= 4; b = b[4:] {
			w = append(w, math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
		rows := len(w) / cols
		w = w[:rows*cols]
		q, scales, err := QuantizeInt8("fuzz", w, rows, cols, sc)
		finite := true
		for _, v := range w {
			finite = finite && isFinite32(v)
		}
		if !finite {
			if !errors.Is(err, ErrNonFinite) {
				t.Fatalf("non-finite input: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateInt8("fuzz", q, scales, rows, cols, sc); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, len(w))
		DequantizeInt8(back, q, scales, rows, cols, sc)
		for i, v := range back {
			if !isFinite32(v) {
				t.Fatalf("dequantized %g from %g", v, w[i])
			}
		}
		for r := range rows {
			for c := range cols {
				i := r*cols + c
				checkErrorBound(t, w[i:i+1], q[i:i+1], scales[sc.ScaleIndex(r, c, cols)])
			}
		}
	})
}
