package lab

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckpointPolicyErrors: a policy that does not exist or does not fit
// the model is refused with one line naming it.
func TestCheckpointPolicyErrors(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"every:0", "want 1 to the layer count"},
		{"every:3", "want 1 to the layer count 2"},
		{"every:x", "whole number"},
		{"often", "unknown policy"},
		{"sqrt:2", "takes no argument"},
		{"budget:", "neither a size"},
		{"budget:lots", "neither a size"},
		{"budget", "want budget:BYTES"},
	} {
		_, err := ParseCheckpoint("checkpoint", tc.policy, 2)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--set checkpoint="+tc.policy+": ") ||
			!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseCheckpoint(%q) = %v, want one line saying %q", tc.policy, err, tc.want)
		}
	}
	for _, ok := range []string{"none", "every:1", "every:2", "sqrt", "selective", "budget:12MiB", "budget:0.5", "budget:100000"} {
		p, err := ParseCheckpoint("checkpoint", ok, 2)
		if err != nil {
			t.Errorf("ParseCheckpoint(%q) = %v", ok, err)
		}
		if b, _ := p.MarshalText(); string(b) != ok {
			t.Errorf("ParseCheckpoint(%q) reads back as %q", ok, b)
		}
	}
}
