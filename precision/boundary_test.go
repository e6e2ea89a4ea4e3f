package precision

import (
	"math"
	"testing"
)

// f32 returns the float32 with bits b.
func f32(b uint32) float32 { return math.Float32frombits(b) }

// narrowTable is a boundary case: input bits, want, and want saturating.
type narrowTable struct {
	name    string
	in      uint32
	want    uint16
	wantSat uint16
}

var fp16Table = []narrowTable{
	{"+0", 0x00000000, 0x0000, 0x0000},
	{"-0", 0x80000000, 0x8000, 0x8000},
	{"+Inf", 0x7F800000, 0x7C00, 0x7C00},
	{"-Inf", 0xFF800000, 0xFC00, 0xFC00},
	{"1", 0x3F800000, 0x3C00, 0x3C00},
	{"largest finite 65504", 0x477FE000, 0x7BFF, 0x7BFF},
	{"just below 65520 rounds down", 0x477FEFFF, 0x7BFF, 0x7BFF},
	{"65520 halfway ties to even: Inf", 0x477FF000, 0x7C00, 0x7BFF},
	{"-65520", 0xC77FF000, 0xFC00, 0xFBFF},
	{"65536 overflows", 0x47800000, 0x7C00, 0x7BFF},
	{"largest float32 overflows", 0x7F7FFFFF, 0x7C00, 0x7BFF},
	{"1+2^-11 halfway ties down to even", 0x3F801000, 0x3C00, 0x3C00},
	{"1+3*2^-11 halfway ties up to even", 0x3F803000, 0x3C02, 0x3C02},
	{"just above 1+2^-11 rounds up", 0x3F801001, 0x3C01, 0x3C01},
	{"smallest normal 2^-14", 0x38800000, 0x0400, 0x0400},
	{"largest subnormal 1023*2^-24", 0x387FC000, 0x03FF, 0x03FF},
	{"1023.5*2^-24 halfway rounds to the smallest normal", 0x387FE000, 0x0400, 0x0400},
	{"smallest subnormal 2^-24", 0x33800000, 0x0001, 0x0001},
	{"-2^-24", 0xB3800000, 0x8001, 0x8001},
	{"2^-25 halfway ties to even zero", 0x33000000, 0x0000, 0x0000},
	{"just above 2^-25 rounds up", 0x33000001, 0x0001, 0x0001},
	{"1.5*2^-24 halfway ties up to 2", 0x33C00000, 0x0002, 0x0002},
	{"2.5*2^-24 halfway ties down to 2", 0x34200000, 0x0002, 0x0002},
	{"float32 subnormal to +0", 0x00000001, 0x0000, 0x0000},
	{"float32 subnormal to -0", 0x807FFFFF, 0x8000, 0x8000},
	{"quiet NaN", 0x7FC00000, 0x7E00, 0x7E00},
	{"negative quiet NaN", 0xFFC00000, 0xFE00, 0xFE00},
	{"signaling NaN with low payload stays NaN", 0x7F800001, 0x7E00, 0x7E00},
	{"signaling NaN payload kept", 0x7FA02000, 0x7F01, 0x7F01},
	{"NaN all payload", 0xFFFFFFFF, 0xFFFF, 0xFFFF},
}

var bf16Table = []narrowTable{
	{"+0", 0x00000000, 0x0000, 0x0000},
	{"-0", 0x80000000, 0x8000, 0x8000},
	{"+Inf", 0x7F800000, 0x7F80, 0x7F80},
	{"-Inf", 0xFF800000, 0xFF80, 0xFF80},
	{"1", 0x3F800000, 0x3F80, 0x3F80},
	{"largest finite", 0x7F7F0000, 0x7F7F, 0x7F7F},
	{"just below the halfway to Inf", 0x7F7F7FFF, 0x7F7F, 0x7F7F},
	{"halfway to Inf ties to even: Inf", 0x7F7F8000, 0x7F80, 0x7F7F},
	{"negative halfway to Inf", 0xFF7F8000, 0xFF80, 0xFF7F},
	{"largest float32", 0x7F7FFFFF, 0x7F80, 0x7F7F},
	{"1+2^-8 halfway ties down to even", 0x3F808000, 0x3F80, 0x3F80},
	{"1+3*2^-8 halfway ties up to even", 0x3F818000, 0x3F82, 0x3F82},
	{"just above 1+2^-8 rounds up", 0x3F808001, 0x3F81, 0x3F81},
	{"smallest normal 2^-126", 0x00800000, 0x0080, 0x0080},
	{"largest float32 subnormal rounds to the smallest normal", 0x007FFFFF, 0x0080, 0x0080},
	{"smallest bf16 subnormal 2^-133", 0x00010000, 0x0001, 0x0001},
	{"-2^-133", 0x80010000, 0x8001, 0x8001},
	{"2^-134 halfway ties to even zero", 0x00008000, 0x0000, 0x0000},
	{"just above 2^-134 rounds up", 0x00008001, 0x0001, 0x0001},
	{"1.5*2^-133 halfway ties up to 2", 0x00018000, 0x0002, 0x0002},
	{"smallest float32 subnormal", 0x00000001, 0x0000, 0x0000},
	{"quiet NaN", 0x7FC00000, 0x7FC0, 0x7FC0},
	{"negative quiet NaN", 0xFFC00000, 0xFFC0, 0xFFC0},
	{"signaling NaN with low payload stays NaN", 0x7F800001, 0x7FC0, 0x7FC0},
	{"signaling NaN payload kept", 0xFF810000, 0xFFC1, 0xFFC1},
	{"NaN all payload", 0x7FFFFFFF, 0x7FFF, 0x7FFF},
}

// TestNarrowBoundaries checks the boundary tables on the scalar
// functions, the references and every kernel (through the slice API, one
// whole kernel group of the same value).
func TestNarrowBoundaries(t *testing.T) {
	l := archKernels()
	for _, f := range []struct {
		name      string
		table     []narrowTable
		conv, sat func(float32) uint16
		ref       func(float32) uint16
		ks        []encKernel
	}{
		{"fp16", fp16Table, ToFP16, ToFP16Sat, refFP16, l.encFP16},
		{"bf16", bf16Table, ToBF16, ToBF16Sat, refBF16, l.encBF16},
	} {
		for _, tc := range f.table {
			x := f32(tc.in)
			if got := f.conv(x); got != tc.want {
				t.Errorf("%s %s: To(%#08x) = %#04x, want %#04x", f.name, tc.name, tc.in, got, tc.want)
			}
			if got := f.sat(x); got != tc.wantSat {
				t.Errorf("%s %s: ToSat(%#08x) = %#04x, want %#04x", f.name, tc.name, tc.in, got, tc.wantSat)
			}
			if got := f.ref(x); got != tc.want {
				t.Errorf("%s %s: reference(%#08x) = %#04x, want %#04x", f.name, tc.name, tc.in, got, tc.want)
			}
			src := make([]float32, 16)
			got := make([]uint16, 16)
			for i := range src {
				src[i] = x
			}
			for _, k := range f.ks {
				for _, sat := range []bool{false, true} {
					want := tc.want
					if sat {
						want = tc.wantSat
					}
					k.fn(&got[0], &src[0], 16, sat)
					for i, g := range got {
						if g != want {
							t.Errorf("%s %s: kernel %s (sat %v) lane %d = %#04x, want %#04x", f.name, tc.name, k.name, sat, i, g, want)
							break
						}
					}
				}
			}
		}
	}
}

// widenTable is a boundary case of widening: input bits, want bits.
type widenTable struct {
	name string
	in   uint16
	want uint32
}

// TestWidenBoundaries checks FromFP16 and FromBF16 on named values.
func TestWidenBoundaries(t *testing.T) {
	for _, tc := range []widenTable{
		{"fp16 +0", 0x0000, 0x00000000},
		{"fp16 -0", 0x8000, 0x80000000},
		{"fp16 smallest subnormal", 0x0001, 0x33800000},
		{"fp16 largest subnormal", 0x03FF, 0x387FC000},
		{"fp16 largest finite", 0x7BFF, 0x477FE000},
		{"fp16 -Inf", 0xFC00, 0xFF800000},
		{"fp16 signaling NaN comes back quiet", 0x7C01, 0x7FC02000},
		{"fp16 negative NaN", 0xFE00, 0xFFC00000},
	} {
		if got := math.Float32bits(FromFP16(tc.in)); got != tc.want {
			t.Errorf("%s: FromFP16(%#04x) = %#08x, want %#08x", tc.name, tc.in, got, tc.want)
		}
	}
	for _, tc := range []widenTable{
		{"bf16 -0", 0x8000, 0x80000000},
		{"bf16 smallest subnormal", 0x0001, 0x00010000},
		{"bf16 largest finite", 0x7F7F, 0x7F7F0000},
		{"bf16 +Inf", 0x7F80, 0x7F800000},
		{"bf16 signaling NaN comes back quiet", 0x7F81, 0x7FC10000},
		{"bf16 negative NaN", 0xFFC0, 0xFFC00000},
	} {
		if got := math.Float32bits(FromBF16(tc.in)); got != tc.want {
			t.Errorf("%s: FromBF16(%#04x) = %#08x, want %#08x", tc.name, tc.in, got, tc.want)
		}
	}
}
