package x86enc

import (
	"bytes"
	"testing"
)

// Register numbers.
const (
	rcx, rdx, rsi, rdi = 1, 2, 6, 7
	r8, r9, r10, r11   = 8, 9, 10, 11
)

// TestEncodings compares the encoder with GNU as 2.40 (binutils): each want
// is what `as --64` produced for the instruction named in the case, in
// Intel syntax.
func TestEncodings(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"vcvtneps2bf16 ymm0, zmm1", VCVTNEPS2BF16(0, 1), []byte{0x62, 0xf2, 0x7e, 0x48, 0x72, 0xc1}},
		{"vcvtneps2bf16 ymm9, zmm17", VCVTNEPS2BF16(9, 17), []byte{0x62, 0x32, 0x7e, 0x48, 0x72, 0xc9}},
		{"vcvtneps2bf16 ymm23, zmm8", VCVTNEPS2BF16(23, 8), []byte{0x62, 0xc2, 0x7e, 0x48, 0x72, 0xf8}},
		{"vdpbf16ps zmm0, zmm1, zmm2", VDPBF16PS(0, 1, 2), []byte{0x62, 0xf2, 0x76, 0x48, 0x52, 0xc2}},
		{"vdpbf16ps zmm31, zmm16, zmm9", VDPBF16PS(31, 16, 9), []byte{0x62, 0x42, 0x7e, 0x40, 0x52, 0xf9}},
		{"vdpbf16ps zmm10, zmm26, zmm30", VDPBF16PS(10, 26, 30), []byte{0x62, 0x12, 0x2e, 0x40, 0x52, 0xd6}},
		{"ldtilecfg [rdi]", LDTILECFG(rdi), []byte{0xc4, 0xe2, 0x78, 0x49, 0x07}},
		{"ldtilecfg [r9]", LDTILECFG(r9), []byte{0xc4, 0xc2, 0x78, 0x49, 0x01}},
		{"tilerelease", TILERELEASE(), []byte{0xc4, 0xe2, 0x78, 0x49, 0xc0}},
		{"tilezero tmm0", TILEZERO(0), []byte{0xc4, 0xe2, 0x7b, 0x49, 0xc0}},
		{"tilezero tmm7", TILEZERO(7), []byte{0xc4, 0xe2, 0x7b, 0x49, 0xf8}},
		{"tileloadd tmm1, [rsi + rdx*1]", TILELOADD(1, rsi, rdx), []byte{0xc4, 0xe2, 0x7b, 0x4b, 0x0c, 0x16}},
		{"tileloadd tmm6, [r10 + r11*1]", TILELOADD(6, r10, r11), []byte{0xc4, 0x82, 0x7b, 0x4b, 0x34, 0x1a}},
		{"tilestored [rdi + rcx*1], tmm3", TILESTORED(3, rdi, rcx), []byte{0xc4, 0xe2, 0x7a, 0x4b, 0x1c, 0x0f}},
		{"tilestored [r8 + r9*1], tmm5", TILESTORED(5, r8, r9), []byte{0xc4, 0x82, 0x7a, 0x4b, 0x2c, 0x08}},
		{"tdpbf16ps tmm0, tmm4, tmm6", TDPBF16PS(0, 4, 6), []byte{0xc4, 0xe2, 0x4a, 0x5c, 0xc4}},
		{"{vex} vpdpbusd ymm1, ymm2, ymm3", VPDPBUSDY(1, 2, 3), []byte{0xc4, 0xe2, 0x6d, 0x50, 0xcb}},
		{"{vex} vpdpbusd ymm9, ymm8, ymm15", VPDPBUSDY(9, 8, 15), []byte{0xc4, 0x42, 0x3d, 0x50, 0xcf}},
		{"{vex} vpdpbusd ymm5, ymm12, ymm0", VPDPBUSDY(5, 12, 0), []byte{0xc4, 0xe2, 0x1d, 0x50, 0xe8}},
		{"tdpbf16ps tmm3, tmm5, tmm7", TDPBF16PS(3, 5, 7), []byte{0xc4, 0xe2, 0x42, 0x5c, 0xdd}},
	}
	for _, tc := range tests {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("%s = % x, want % x", tc.name, tc.got, tc.want)
		}
	}
}
