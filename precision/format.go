package precision

import (
	"errors"
	"fmt"
	"strings"
)

// Format is a storage format of floating-point values. The zero value is
// F32.
type Format uint8

// The formats. The names are those of String and ParseFormat.
const (
	F32  Format = iota // IEEE binary32 (float32)
	BF16               // bfloat16: float32's sign and 8-bit exponent, 7 fraction bits
	FP16               // IEEE binary16: 5-bit exponent, 10 fraction bits
)

// formatNames are the formats' names, indexed by Format.
var formatNames = [...]string{F32: "f32", BF16: "bf16", FP16: "fp16"}

// ErrUnknownFormat is returned (wrapped) by ParseFormat for a name that
// is not a format.
var ErrUnknownFormat = errors.New("unknown format")

// Bytes is the size of one value in the format (0 for an invalid Format).
func (f Format) Bytes() int {
	switch f {
	case F32:
		return 4
	case BF16, FP16:
		return 2
	}
	return 0
}

// String returns the format's name ("f32", "bf16", "fp16").
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Valid reports whether f is one of the defined formats.
func (f Format) Valid() bool { return int(f) < len(formatNames) }

// ParseFormat returns the format called name (as String spells it).
func ParseFormat(name string) (Format, error) {
	for f, n := range formatNames {
		if n == name {
			return Format(f), nil
		}
	}
	return 0, fmt.Errorf("precision: %w %q (want one of %s)", ErrUnknownFormat, name, strings.Join(formatNames[:], ", "))
}
