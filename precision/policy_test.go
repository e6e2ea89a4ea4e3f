package precision

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		act     Format
		scaling bool
		mixed   bool
	}{
		{"f32", F32, false, false},
		{"bf16", BF16, false, true},
		{"fp16", FP16, true, true},
		{"fp16-noscale", FP16, false, true},
	} {
		p, err := ParsePolicy(tc.name)
		if err != nil {
			t.Fatalf("ParsePolicy(%q) = %v", tc.name, err)
		}
		if p.Name != tc.name || p.Activations != tc.act || p.Weights != tc.act || p.Gradients != tc.act ||
			p.LossScaling != tc.scaling || p.Mixed() != tc.mixed {
			t.Errorf("ParsePolicy(%q) = %v", tc.name, p)
		}
		if p.Accumulate != F32 || p.Master != F32 {
			t.Errorf("ParsePolicy(%q): accumulate %v, master %v, want f32", tc.name, p.Accumulate, p.Master)
		}
	}
	for _, bad := range []string{"", "F32", "fp8", "bf16 ", "fp16-scale"} {
		_, err := ParsePolicy(bad)
		if !errors.Is(err, ErrUnknownPolicy) {
			t.Errorf("ParsePolicy(%q) error %v, want ErrUnknownPolicy", bad, err)
			continue
		}
		for _, n := range PolicyNames() {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("ParsePolicy(%q) error %q does not list %q", bad, err, n)
			}
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		f     Format
		name  string
		bytes int
	}{{F32, "f32", 4}, {BF16, "bf16", 2}, {FP16, "fp16", 2}} {
		if tc.f.String() != tc.name || tc.f.Bytes() != tc.bytes || !tc.f.Valid() {
			t.Errorf("%d: String %q, Bytes %d, Valid %v", tc.f, tc.f, tc.f.Bytes(), tc.f.Valid())
		}
		if g, err := ParseFormat(tc.name); g != tc.f || err != nil {
			t.Errorf("ParseFormat(%q) = %v, %v", tc.name, g, err)
		}
	}
	if f := Format(9); f.Valid() || f.Bytes() != 0 || f.String() != "Format(9)" {
		t.Errorf("Format(9): Valid %v, Bytes %d, String %q", f.Valid(), f.Bytes(), f)
	}
	if _, err := ParseFormat("f64"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("ParseFormat(f64) error %v, want ErrUnknownFormat", err)
	}
}

// FuzzParsePolicy checks that ParsePolicy accepts exactly the named
// policies and that each error names the input.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range append(PolicyNames(), "", "fp16 ", "BF16", "f32\x00") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		known := false
		for _, n := range PolicyNames() {
			known = known || n == s
		}
		if known != (err == nil) || (err == nil && p.Name != s) {
			t.Fatalf("ParsePolicy(%q) = %v, %v", s, p, err)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Fatalf("ParsePolicy(%q) error %q does not quote the input", s, err)
		}
	})
}

// FuzzParseFormat checks that ParseFormat accepts exactly the three names
// and round-trips them through String.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"f32", "bf16", "fp16", "", "fp32", "bf16\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseFormat(s)
		if err == nil && g.String() != s {
			t.Fatalf("ParseFormat(%q) = %v", s, g)
		}
		if err != nil && (s == "f32" || s == "bf16" || s == "fp16") {
			t.Fatalf("ParseFormat(%q) = %v", s, err)
		}
	})
}

// TestPolicyText: a policy is a setting and a checkpoint's metadata by
// its name alone; the name reads back as the same policy, an unknown name
// is refused, and the zero Policy (the float32 graph) says f32.
func TestPolicyText(t *testing.T) {
	for _, name := range PolicyNames() {
		p, _ := ParsePolicy(name)
		b, err := p.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("MarshalText(%s) = %q, %v; want %q", name, b, err, name)
		}
		var q Policy
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("UnmarshalText(%q) = %+v, %v; want %+v", b, q, err, p)
		}
	}
	var q Policy
	if err := q.UnmarshalText([]byte("fp8")); !errors.Is(err, ErrUnknownPolicy) || q != (Policy{}) {
		t.Errorf("UnmarshalText(fp8) = %+v, %v; want ErrUnknownPolicy and no change", q, err)
	}
	if b, _ := (Policy{}).MarshalText(); string(b) != "f32" || F32Policy.Mixed() {
		t.Errorf("the zero Policy says %q, want f32 (F32Policy mixed: %v)", b, F32Policy.Mixed())
	}
}
