package precision

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Symmetric int8 quantization.
//
// A group of values (a channel, the whole tensor or a block, as the scheme
// says) shares one scale: scale = max|w| / 127 in float32, and each value
// becomes q = clamp(round(w / scale), -127, 127), so w ≈ q·scale.
//
// The rounding rule is round to nearest, ties to even. It is the rule of
// the x86 conversion VCVTPS2DQ under the default MXCSR (and of numpy's and
// torch's round), so a vectorized quantizer (internal/qgemm quantizes
// activations at run time with VDIVPS and VCVTPS2DQ) gives bitwise the
// codes of this scalar one; and it is unbiased: halfway cases go up as
// often as down. The quotient w/scale is one correctly rounded float32
// division (not a multiplication by a reciprocal), the same in both.
//
// The codes stay in [-127, 127], never -128: the range is symmetric (q and
// -q are both codes, the scale maps ±max|w| to ±127 exactly), and the
// kernels' tricks stay exact: negating a code (VPSIGNB) cannot overflow,
// and u8·s8 pair sums of VPMADDUBSW with |a| ≤ 127 stay within int16.
//
// A group whose values are all zero gets scale 0 and codes 0: it
// dequantizes to exact zeros, and the quantizer never divides by that
// scale. A group so small that max|w|/127 underflows to zero gets the
// smallest subnormal scale (2^-149) instead: every float32 of such a group
// is an integer multiple of 2^-149 below 64·2^-149, so it quantizes
// exactly. A non-finite weight is refused: QuantizeInt8 returns an error
// naming the tensor and the index (row, col) of the first one.

// Int8Scheme says which values share one int8 scale. The zero value is
// Int8PerChannel.
type Int8Scheme uint8

// The schemes, named as String and ParseInt8Scheme spell them.
const (
	// Int8PerChannel: one scale per output channel. gptlab stores a linear
	// layer's weight as nanoGPT does, [out, in] (y = x·Wᵀ), so output
	// channel j is row j of W: scale[j] = max|W[j,:]| / 127.
	Int8PerChannel Int8Scheme = iota
	// Int8PerTensor: one scale for the whole matrix.
	Int8PerTensor
	// Int8PerBlock32: one scale per block of Int8BlockSize consecutive
	// values along the input dimension (a row of W), as llama.cpp's Q8_0;
	// the last block of a row is shorter when the row length is not a
	// multiple of 32. scale[j*Int8Blocks(cols)+b] is block b of row j.
	Int8PerBlock32
)

// Int8Max is the largest code magnitude: codes are in [-Int8Max, Int8Max].
const Int8Max = 127

// Int8BlockSize is the block length of Int8PerBlock32.
const Int8BlockSize = 32

// Int8Rounding names the rounding rule (for checkpoint metadata).
const Int8Rounding = "nearest-even"

var int8SchemeNames = [...]string{Int8PerChannel: "channel", Int8PerTensor: "tensor", Int8PerBlock32: "block32"}

// ErrUnknownInt8Scheme is returned (wrapped) for a name that is not a scheme.
var ErrUnknownInt8Scheme = errors.New("unknown int8 scheme")

// ErrNonFinite is returned (wrapped) when a weight to quantize or a scale
// is NaN or infinite.
var ErrNonFinite = errors.New("non-finite value")

// String returns the scheme's name ("channel", "tensor", "block32").
func (s Int8Scheme) String() string {
	if s.Valid() {
		return int8SchemeNames[s]
	}
	return fmt.Sprintf("Int8Scheme(%d)", uint8(s))
}

// Valid reports whether s is one of the defined schemes.
func (s Int8Scheme) Valid() bool { return int(s) < len(int8SchemeNames) }

// ParseInt8Scheme returns the scheme called name.
func ParseInt8Scheme(name string) (Int8Scheme, error) {
	for s, n := range int8SchemeNames {
		if n == name {
			return Int8Scheme(s), nil
		}
	}
	return 0, fmt.Errorf("precision: %w %q (want one of %s)", ErrUnknownInt8Scheme, name, strings.Join(int8SchemeNames[:], ", "))
}

// MarshalText returns the scheme's name; an invalid scheme is an error.
func (s Int8Scheme) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("precision: %w %d", ErrUnknownInt8Scheme, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText sets s from its name, refusing an unknown one.
func (s *Int8Scheme) UnmarshalText(b []byte) error {
	v, err := ParseInt8Scheme(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Int8Blocks is the number of Int8PerBlock32 blocks in a row of cols values.
func Int8Blocks(cols int) int { return (cols + Int8BlockSize - 1) / Int8BlockSize }

// NumScales is the number of scales a rows×cols matrix has under s:
// rows (channel), 1 (tensor), rows·Int8Blocks(cols) (block32).
func (s Int8Scheme) NumScales(rows, cols int) int {
	switch s {
	case Int8PerTensor:
		return 1
	case Int8PerBlock32:
		return rows * Int8Blocks(cols)
	}
	return rows
}

// ScaleIndex is the index in the scales of the value at (row, col) of a
// matrix with cols columns under s.
func (s Int8Scheme) ScaleIndex(row, col, cols int) int {
	switch s {
	case Int8PerTensor:
		return 0
	case Int8PerBlock32:
		return row*Int8Blocks(cols) + col/Int8BlockSize
	}
	return row
}

// Int8Scale is the scale of a group whose largest magnitude is amax (finite,
// ≥ 0): amax/127, 0 for amax == 0, 2^-149 where amax/127 underflows.
func Int8Scale(amax float32) float32 {
	if amax == 0 {
		return 0
	}
	s := amax / Int8Max
	if s == 0 {
		return math.SmallestNonzeroFloat32
	}
	return s
}

// RoundInt8 is the code of x under scale (finite x, scale > 0):
// clamp(round-half-even(x/scale), -127, 127). Clamping the quotient before
// rounding gives the same code and keeps the conversion in range.
func RoundInt8(x, scale float32) int8 {
	v := x / scale
	v = min(max(v, -Int8Max), Int8Max)
	return int8(math.RoundToEven(float64(v)))
}

// quantizeGroup writes the codes of x (finite) under its own scale into q
// and returns the scale.
func quantizeGroup(q []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	s := Int8Scale(amax)
	if s == 0 {
		clear(q[:len(x)])
		return 0
	}
	for i, v := range x {
		q[i] = RoundInt8(v, s)
	}
	return s
}

// QuantizeInt8Vector quantizes x with one scale, the per-row rule of
// dynamic activation quantization, writing len(x) codes into q and
// returning the scale. If x holds a NaN or an infinity it writes zero codes
// and returns a NaN scale (so whatever is computed from the row is NaN).
func QuantizeInt8Vector(q []int8, x []float32) float32 {
	q = q[:len(x)]
	for _, v := range x {
		if !isFinite32(v) {
			clear(q)
			return float32(math.NaN())
		}
	}
	return quantizeGroup(q, x)
}

func isFinite32(v float32) bool { return math.Float32bits(v)&0x7f800000 != 0x7f800000 }

// QuantizeInt8 quantizes the rows×cols matrix w (row-major, [out, in]) under
// scheme s and returns its codes (rows·cols) and scales (s.NumScales). name
// names the tensor in errors.
func QuantizeInt8(name string, w []float32, rows, cols int, s Int8Scheme) ([]int8, []float32, error) {
	q := make([]int8, rows*cols)
	scales := make([]float32, s.NumScales(rows, cols))
	if err := QuantizeInt8Into(name, q, scales, w, rows, cols, s); err != nil {
		return nil, nil, err
	}
	return q, scales, nil
}

// QuantizeInt8Into is QuantizeInt8 into caller-owned q and scales. On an
// error q and scales are left unspecified.
func QuantizeInt8Into(name string, q []int8, scales []float32, w []float32, rows, cols int, s Int8Scheme) error {
	if err := checkInt8Dims(name, rows, cols, s); err != nil {
		return err
	}
	if len(w) != rows*cols || len(q) != rows*cols || len(scales) != s.NumScales(rows, cols) {
		return fmt.Errorf("precision: %s: %d×%d %s matrix needs %d values and %d scales, have w %d, q %d, scales %d",
			name, rows, cols, s, rows*cols, s.NumScales(rows, cols), len(w), len(q), len(scales))
	}
	for i, v := range w {
		if !isFinite32(v) {
			return fmt.Errorf("precision: %s: %w %g at (%d, %d): refusing to quantize", name, ErrNonFinite, v, i/cols, i%cols)
		}
	}
	switch s {
	case Int8PerTensor:
		scales[0] = quantizeGroup(q, w)
	case Int8PerChannel:
		// Channel j is row j of the [out, in] matrix.
		for j := range rows {
			scales[j] = quantizeGroup(q[j*cols:(j+1)*cols], w[j*cols:(j+1)*cols])
		}
	case Int8PerBlock32:
		nb := Int8Blocks(cols)
		for j := range rows {
			for b := range nb {
				lo, hi := j*cols+b*Int8BlockSize, j*cols+min((b+1)*Int8BlockSize, cols)
				scales[j*nb+b] = quantizeGroup(q[lo:hi], w[lo:hi])
			}
		}
	}
	return nil
}

func checkInt8Dims(name string, rows, cols int, s Int8Scheme) error {
	if !s.Valid() {
		return fmt.Errorf("precision: %s: %w %d", name, ErrUnknownInt8Scheme, uint8(s))
	}
	if rows < 0 || cols < 0 {
		return fmt.Errorf("precision: %s: bad shape %d×%d", name, rows, cols)
	}
	return nil
}

// ValidateInt8 checks a quantized matrix read from elsewhere: the lengths
// of q (rows·cols) and scales (s.NumScales), every scale finite and ≥ 0,
// and no code -128. The error names the tensor and what is wrong.
func ValidateInt8(name string, q []int8, scales []float32, rows, cols int, s Int8Scheme) error {
	if err := checkInt8Dims(name, rows, cols, s); err != nil {
		return err
	}
	if len(q) != rows*cols {
		return fmt.Errorf("precision: %s: %d codes, want %d×%d = %d", name, len(q), rows, cols, rows*cols)
	}
	if n := s.NumScales(rows, cols); len(scales) != n {
		return fmt.Errorf("precision: %s: %d scales, want %d for %s on %d×%d", name, len(scales), n, s, rows, cols)
	}
	for i, v := range scales {
		if !isFinite32(v) {
			return fmt.Errorf("precision: %s: scale %d is %w %g", name, i, ErrNonFinite, v)
		}
		if v < 0 {
			return fmt.Errorf("precision: %s: scale %d is negative (%g)", name, i, v)
		}
	}
	for i, v := range q {
		if v < -Int8Max {
			return fmt.Errorf("precision: %s: code -128 at (%d, %d): codes are in [-127, 127]", name, i/cols, i%cols)
		}
	}
	return nil
}

// DequantizeInt8 sets dst[i] = q[i]·scale of i's group (float32 product)
// for a rows×cols matrix under s. It panics if the lengths do not match.
func DequantizeInt8(dst []float32, q []int8, scales []float32, rows, cols int, s Int8Scheme) {
	if len(dst) != rows*cols || len(q) != rows*cols || len(scales) != s.NumScales(rows, cols) {
		panic(fmt.Sprintf("precision: DequantizeInt8: %d×%d %s: dst %d, q %d, scales %d", rows, cols, s, len(dst), len(q), len(scales)))
	}
	for r := range rows {
		for c := range cols {
			i := r*cols + c
			dst[i] = float32(q[i]) * scales[s.ScaleIndex(r, c, cols)]
		}
	}
}

// SQNR is the signal-to-quantization-noise ratio of approx against ref in
// dB: 10·log10(Σref² / Σ(ref-approx)²), computed in float64. It is +Inf
// when approx equals ref (no noise), -Inf when ref is zero and approx is not.
func SQNR(ref, approx []float32) float64 {
	if len(ref) != len(approx) {
		panic(fmt.Sprintf("precision: SQNR: lengths %d and %d", len(ref), len(approx)))
	}
	var sig, noise float64
	for i, r := range ref {
		d := float64(r) - float64(approx[i])
		sig += float64(r) * float64(r)
		noise += d * d
	}
	if noise == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(sig/noise)
}

// SQNRRows is SQNR of each row (each output channel) of rows×cols matrices.
func SQNRRows(ref, approx []float32, rows, cols int) []float64 {
	if len(ref) != rows*cols {
		panic(fmt.Sprintf("precision: SQNRRows: %d values for %d×%d", len(ref), rows, cols))
	}
	out := make([]float64, rows)
	for r := range rows {
		out[r] = SQNR(ref[r*cols:(r+1)*cols], approx[r*cols:(r+1)*cols])
	}
	return out
}
