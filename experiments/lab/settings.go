package lab

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gptlab/reports"
)

// A lab's config is a struct of defaults whose fields carry `set:"key"` (the
// name used by --set key=value) and `help:"..."` tags. ApplySets overrides
// fields from key=value pairs; an unknown key or a value of the wrong type is
// an error naming it (exit status 2), never a silent no-op.

// SetFlag collects repeated --set key=value flags.
type SetFlag []string

func (s *SetFlag) String() string { return strings.Join(*s, " ") }

// Set records one key=value pair.
func (s *SetFlag) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("--set %q: want key=value", v)
	}
	*s = append(*s, v)
	return nil
}

// Field is one settable field of a config struct.
type Field struct {
	Key   string        // the name --set uses
	Help  string        // what the setting means
	Value reflect.Value // the field itself: settable
}

// Fields lists the settable fields of *cfg in declaration order.
func Fields(cfg any) []Field {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("experiments: config must be a pointer to a struct, got %T", cfg))
	}
	rv = rv.Elem()
	var out []Field
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Type().Field(i)
		key := f.Tag.Get("set")
		if key == "" || key == "-" {
			continue
		}
		out = append(out, Field{Key: key, Help: f.Tag.Get("help"), Value: rv.Field(i)})
	}
	return out
}

// ApplySets applies key=value overrides to the config struct cfg points to.
func ApplySets(cfg any, sets []string) error {
	fields := Fields(cfg)
	byKey := make(map[string]Field, len(fields))
	for _, f := range fields {
		byKey[f.Key] = f
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return Usagef("--set %q: want key=value", kv)
		}
		f, ok := byKey[k]
		if !ok {
			keys := make([]string, 0, len(byKey))
			for key := range byKey {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			return Usagef("--set %s: unknown key %q (known: %s)", kv, k, strings.Join(keys, ", "))
		}
		if err := setValue(f.Value, v); err != nil {
			return Usagef("--set %s: %v", kv, err)
		}
	}
	return nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// setValue parses s into v according to v's type: a type that reads
// itself from text (encoding.TextUnmarshaler: a precision policy, a
// checkpointing policy) is parsed here, once, where the setting is read.
func setValue(v reflect.Value, s string) error {
	if v.CanAddr() {
		if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
			return u.UnmarshalText([]byte(s))
		}
	}
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration", s)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 0, v.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			bits := v.Type().Bits()
			return fmt.Errorf("%q is out of range (want %d to %d)", s, -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
		}
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 0, v.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%q is out of range (want 0 to %d)", s, ^uint64(0)>>(64-v.Type().Bits()))
		}
		if err != nil {
			return fmt.Errorf("%q is not a non-negative integer", s)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, v.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%q is out of range for a %d-bit number", s, v.Type().Bits())
		}
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(x)
	case reflect.Slice:
		if strings.TrimSpace(s) == "" { // an empty list
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			return nil
		}
		parts := strings.Split(s, ",")
		out := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := setValue(out.Index(i), strings.TrimSpace(p)); err != nil {
				return err
			}
		}
		v.Set(out)
	default:
		return fmt.Errorf("field of type %s cannot be set", v.Type())
	}
	return nil
}

// Values turns a config struct into the report's config section.
func Values(cfg any) reports.Values {
	var out reports.Values
	for _, f := range Fields(cfg) {
		out.Set(f.Key, Text(f.Value.Interface()))
	}
	return out
}

// Text is a setting's value as reports show it: a duration or a value
// that writes itself as text (encoding.TextMarshaler) as its text, and a
// list of such values as a list of their texts; anything else as it is.
func Text(x any) any {
	switch v := x.(type) {
	case time.Duration:
		return v.String()
	case encoding.TextMarshaler:
		b, err := v.MarshalText()
		if err != nil {
			return err.Error()
		}
		return string(b)
	}
	rv := reflect.ValueOf(x)
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Implements(reflect.TypeFor[encoding.TextMarshaler]()) {
		out := make([]string, rv.Len())
		for i := range out {
			out[i] = Text(rv.Index(i).Interface()).(string)
		}
		return out
	}
	return x
}

// maxAlignment bounds an alignment setting: beyond it every buffer would
// be rounded up to more than a megabyte.
const maxAlignment = 1 << 20

// CheckAlignment checks an alignment setting: a power of two up to
// maxAlignment.
func CheckAlignment(a int64) error {
	if a <= 0 || a&(a-1) != 0 || a > maxAlignment {
		return Usagef("--set alignment=%d: want a power of two from 1 to %d", a, maxAlignment)
	}
	return nil
}
