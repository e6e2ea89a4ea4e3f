package precision

import (
	"math"
	"testing"

	"github.com/x448/float16"
)

// refWiden widens the bits h of a binary format with expBits exponent and
// fracBits fraction bits by arithmetic on its fields, a method unlike the
// bit moves of FromFP16 and FromBF16: ±(2^f + m)·2^(e - bias - f) for
// normals, ±m·2^(1 - bias - f) for subnormals (bias = 2^(expBits-1) - 1),
// and a NaN as a quiet float32 NaN of its sign and payload.
func refWiden(h uint16, expBits, fracBits int) float32 {
	bias := 1<<(expBits-1) - 1
	e, m := int(h>>fracBits)&(1<<expBits-1), h&(1<<fracBits-1)
	neg := h>>(expBits+fracBits) != 0
	var v float64
	switch {
	case e == 1<<expBits-1 && m == 0:
		v = math.Inf(1)
	case e == 1<<expBits-1:
		b := uint32(0x7FC00000) | uint32(m)<<(23-fracBits)
		if neg {
			b |= 0x80000000
		}
		return math.Float32frombits(b)
	case e == 0:
		v = float64(m) * pow2(1-bias-fracBits)
	default:
		v = float64(1<<fracBits+int(m)) * pow2(e-bias-fracBits)
	}
	if neg {
		v = -v
	}
	return float32(v)
}

// TestWiden checks FromFP16, FromBF16 and the widening kernels on all 2^16
// values against refWiden (and x448/float16 for fp16), and that narrowing
// the result gives the value back (a NaN's with its quiet bit set).
func TestWiden(t *testing.T) {
	l := archKernels()
	for _, f := range []struct {
		name              string
		expBits, fracBits int
		from              func(uint16) float32
		to                func(float32) uint16
		also              func(uint16) float32 // a second reference, or nil
		ks                []decKernel
	}{
		{"fp16", 5, 10, FromFP16, ToFP16, func(h uint16) float32 { return float16.Frombits(h).Float32() }, l.decFP16},
		{"bf16", 8, 7, FromBF16, ToBF16, nil, l.decBF16},
	} {
		src := make([]uint16, 1<<16)
		want := make([]float32, len(src))
		quiet := uint16(1) << (f.fracBits - 1)
		for i := range src {
			h := uint16(i)
			src[i] = h
			want[i] = f.from(h)
			w := math.Float32bits(want[i])
			if r := math.Float32bits(refWiden(h, f.expBits, f.fracBits)); w != r {
				t.Errorf("%s: From(%#04x) = %#08x, arithmetic gives %#08x", f.name, h, w, r)
			}
			if f.also != nil {
				if r := math.Float32bits(f.also(h)); w != r {
					t.Errorf("%s: From(%#04x) = %#08x, x448 gives %#08x", f.name, h, w, r)
				}
			}
			back := f.to(want[i])
			if want[i] != want[i] {
				back &^= quiet
				h &^= quiet
			}
			if back != h {
				t.Errorf("%s: To(From(%#04x)) = %#04x", f.name, h, back)
			}
		}
		for _, k := range f.ks {
			got := make([]float32, len(src))
			k.fn(&got[0], &src[0], len(src))
			checkWiden(t, f.name+" kernel "+k.name, src, got, want)
		}
	}
}

// checkWiden reports each value where got and want differ in bits.
func checkWiden(t *testing.T, name string, src []uint16, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if g, w := math.Float32bits(got[i]), math.Float32bits(want[i]); g != w {
			if bad++; bad <= 4 {
				t.Errorf("%s(%#04x) = %#08x, want %#08x", name, src[i], g, w)
			}
		}
	}
	if bad > 4 {
		t.Errorf("%s: %d mismatches in all", name, bad)
	}
}
