package lab

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

type testConfig struct {
	Name    string        `set:"name" help:"a string"`
	N       int           `set:"n" help:"an int"`
	Rate    float64       `set:"rate" help:"a float"`
	On      bool          `set:"on" help:"a bool"`
	Sizes   []int64       `set:"sizes" help:"a list"`
	Timeout time.Duration `set:"timeout" help:"a duration"`
	hidden  int           //lint:ignore U1000 a field without a set tag, which --set must not reach
}

func TestApplySets(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want testConfig
		bad  bool
		msg  string // a word the error must hold
	}{
		{"defaults", nil, testConfig{Name: "x", N: 1}, false, ""},
		{"every type", []string{"name=y", "n=7", "rate=0.5", "on=true", "sizes=1,2,3", "timeout=2s"},
			testConfig{Name: "y", N: 7, Rate: 0.5, On: true, Sizes: []int64{1, 2, 3}, Timeout: 2 * time.Second}, false, ""},
		{"later wins", []string{"n=2", "n=3"}, testConfig{Name: "x", N: 3}, false, ""},
		{"value with equals sign", []string{"name=a=b"}, testConfig{Name: "a=b", N: 1}, false, ""},
		{"unknown key", []string{"nope=1"}, testConfig{}, true, ""},
		{"unexported field is not a key", []string{"hidden=1"}, testConfig{}, true, ""},
		{"int given a float", []string{"n=1.5"}, testConfig{}, true, ""},
		{"bool given a word", []string{"on=maybe"}, testConfig{}, true, ""},
		{"list with a bad element", []string{"sizes=1,x"}, testConfig{}, true, ""},
		{"no equals sign", []string{"n"}, testConfig{}, true, ""},
		{"bad duration", []string{"timeout=5"}, testConfig{}, true, ""},
		{"integer out of range", []string{"n=99999999999999999999"}, testConfig{}, true, "out of range"},
		{"integer not a number", []string{"n=ten"}, testConfig{}, true, "not an integer"},
		{"float out of range", []string{"rate=1e999"}, testConfig{}, true, "out of range"},
		{"list element out of range", []string{"sizes=1,99999999999999999999"}, testConfig{}, true, "out of range"},
		{"empty list", []string{"sizes="}, testConfig{Name: "x", N: 1, Sizes: []int64{}}, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig{Name: "x", N: 1}
			err := ApplySets(&cfg, tc.sets)
			if tc.bad {
				if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("ApplySets(%q) = %v, want an error wrapping ErrUsage saying %q", tc.sets, err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplySets(%q) = %v", tc.sets, err)
			}
			if !reflect.DeepEqual(cfg, tc.want) {
				t.Errorf("ApplySets(%q) gave %+v, want %+v", tc.sets, cfg, tc.want)
			}
		})
	}
}

func TestConfigValuesOrder(t *testing.T) {
	cfg := testConfig{Name: "x", Timeout: time.Second}
	v := Values(&cfg)
	want := []string{"name", "n", "rate", "on", "sizes", "timeout"}
	if !reflect.DeepEqual(v.Keys(), want) {
		t.Fatalf("Values keys = %v, want %v", v.Keys(), want)
	}
	if d, _ := v.Get("timeout"); d != "1s" {
		t.Errorf("timeout = %v, want 1s", d)
	}
}

// FuzzApplySets: --set is outside input; whatever it holds, ApplySets
// either applies it or returns a usage error, never panics.
func FuzzApplySets(f *testing.F) {
	for _, s := range []string{"n=1", "rate=1e-3", "sizes=1,,2", "on=T", "=", "name=", "timeout=1h2m", "n=0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		cfg := testConfig{}
		if err := ApplySets(&cfg, []string{kv}); err != nil && !errors.Is(err, ErrUsage) {
			t.Fatalf("ApplySets(%q) = %v, not a usage error", kv, err)
		}
	})
}
