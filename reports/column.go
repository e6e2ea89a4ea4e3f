package reports

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Kind says how a column's values are shown.
type Kind uint8

// The kinds of column. Each formats its values one way in text and
// markdown; JSON and CSV keep the exact value (bytes as a count, a
// duration in seconds).
const (
	TextKind     Kind = iota // left-aligned text; long text wraps in its column or becomes a note
	IntKind                  // an integer
	FloatKind                // a number with a fixed number of decimals
	BytesKind                // a byte count, shown as B, KiB, MiB or GiB
	DurationKind             // a time.Duration in a fixed unit with fixed decimals
	RatioKind                // a/b with three decimals
	PercentKind              // a fraction shown as a percentage with fixed decimals
)

// Column is one column of a table: its header and how its cells are
// formatted. Make one with Text, Int, Float, Bytes, Duration, Ratio or
// Percent.
type Column struct {
	Name     string        `json:"name"`
	Kind     Kind          `json:"kind"`
	Decimals int           `json:"decimals,omitempty"` // FloatKind (negative: that many significant digits), PercentKind, DurationKind
	Unit     time.Duration `json:"unit,omitempty"`     // DurationKind: the unit shown (time.Millisecond, …)
}

// Text is a column of text (or of values shown with Cell).
func Text(name string) Column { return Column{Name: name, Kind: TextKind} }

// Int is a column of integers.
func Int(name string) Column { return Column{Name: name, Kind: IntKind} }

// Float is a column of numbers shown with a fixed number of decimals.
func Float(name string, decimals int) Column {
	return Column{Name: name, Kind: FloatKind, Decimals: decimals}
}

// Significant is a column of numbers shown with a fixed number of
// significant digits (for values spanning magnitudes: 0, 1.2e-07).
func Significant(name string, digits int) Column {
	return Column{Name: name, Kind: FloatKind, Decimals: -max(digits, 1)}
}

// Bytes is a column of byte counts: KiB, MiB and GiB in text and markdown,
// the exact count in JSON and CSV.
func Bytes(name string) Column { return Column{Name: name, Kind: BytesKind} }

// Duration is a column of time.Duration values shown in unit with a fixed
// number of decimals; the header names the unit ("step (ms)"). JSON and CSV
// hold seconds.
func Duration(name string, unit time.Duration, decimals int) Column {
	return Column{Name: name, Kind: DurationKind, Unit: unit, Decimals: decimals}
}

// Ratio is a column of ratios (a/b) with three decimals.
func Ratio(name string) Column { return Column{Name: name, Kind: RatioKind, Decimals: 3} }

// Percent is a column of fractions shown as percentages ("33.3%"); JSON and
// CSV hold the fraction.
func Percent(name string, decimals int) Column {
	return Column{Name: name, Kind: PercentKind, Decimals: decimals}
}

// Header is the column's title as printed: a duration's names its unit.
func (c Column) Header() string {
	if c.Kind == DurationKind {
		return c.Name + " (" + unitName(c.Unit) + ")"
	}
	return c.Name
}

// UnitName is the unit of the column's exact values in JSON and CSV: "bytes",
// "s", "ratio", "fraction", or "" for text and plain numbers.
func (c Column) UnitName() string {
	switch c.Kind {
	case BytesKind:
		return "bytes"
	case DurationKind:
		return "s"
	case RatioKind:
		return "ratio"
	case PercentKind:
		return "fraction"
	}
	return ""
}

// numeric reports whether the column is right-aligned.
func (c Column) numeric() bool { return c.Kind != TextKind }

// Missing is how text and markdown show a value that was not measured (nil
// or NaN); JSON holds null.
const Missing = "—"

// Format formats one value of the column for text and markdown. A string
// is shown as it is in any column ("-", "n/a").
func (c Column) Format(v any) string {
	if v == nil {
		return Missing
	}
	if s, ok := v.(string); ok {
		return s
	}
	if b, ok := v.(brief); ok {
		return string(b)
	}
	if c.Kind == DurationKind {
		if d, ok := v.(time.Duration); ok {
			return strconv.FormatFloat(float64(d)/float64(c.unit()), 'f', c.Decimals, 64)
		}
	}
	if c.Kind == TextKind {
		return Cell(v)
	}
	x, isNum := number(v)
	if !isNum {
		return Cell(v)
	}
	if math.IsNaN(x) {
		return Missing
	}
	if math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	switch c.Kind {
	case IntKind:
		if n, ok := integer(v); ok {
			return strconv.FormatInt(n, 10)
		}
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	case BytesKind:
		return FormatBytes(x)
	case FloatKind, RatioKind:
		if c.Decimals < 0 {
			return strconv.FormatFloat(x, 'g', -c.Decimals, 64)
		}
		return strconv.FormatFloat(x, 'f', c.Decimals, 64)
	case PercentKind:
		return strconv.FormatFloat(100*x, 'f', c.Decimals, 64) + "%"
	}
	return Cell(v)
}

// Raw is the exact value of one cell for JSON and CSV: integers as int64,
// other numbers as float64 (nil for NaN and infinities, which JSON lacks),
// durations in seconds, strings and booleans as they are.
func (c Column) Raw(v any) any {
	switch x := v.(type) {
	case nil, string, bool:
		return x
	case brief:
		return string(x)
	case time.Duration:
		return x.Seconds()
	}
	if n, ok := integer(v); ok {
		return n
	}
	if x, ok := number(v); ok {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return x
	}
	return Cell(v)
}

func (c Column) unit() time.Duration {
	if c.Unit <= 0 {
		return time.Second
	}
	return c.Unit
}

func unitName(u time.Duration) string {
	switch u {
	case time.Nanosecond:
		return "ns"
	case time.Microsecond:
		return "µs"
	case time.Millisecond:
		return "ms"
	case time.Second, 0:
		return "s"
	case time.Minute:
		return "min"
	}
	return u.String()
}

// brief is a text cell that text output shortens to one line (a passed
// check's detail); markdown, JSON and CSV hold it in full.
type brief string

// FormatBytes shows a byte count in the largest binary unit it reaches,
// with at most two decimals: 768 B, 1.5 KiB, 11.58 MiB, 192 MiB.
func FormatBytes(n float64) string {
	neg := n < 0
	a := math.Abs(n)
	s := strconv.FormatFloat(a, 'f', 0, 64) + " B"
	for _, u := range []struct {
		name string
		size float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if a >= u.size {
			f := strconv.FormatFloat(a/u.size, 'f', 2, 64)
			f = strings.TrimRight(strings.TrimRight(f, "0"), ".")
			s = f + " " + u.name
			break
		}
	}
	if neg {
		return "-" + s
	}
	return s
}

// number converts any Go number to float64.
func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// integer converts a Go integer (not a float) to int64.
func integer(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}
