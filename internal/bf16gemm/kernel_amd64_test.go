//go:build amd64 && !purego

package bf16gemm

import (
	"strings"
	"testing"
)

// TestBF16Off checks that GPTLAB_BF16=off turns the bf16 hardware paths
// off and says so.
func TestBF16Off(t *testing.T) {
	t.Setenv("GPTLAB_BF16", "off")
	if k := dotKernel(); k != nil {
		t.Errorf("GPTLAB_BF16=off: dotKernel() = %s, want none", k.name)
	}
	if k, why := amxKernel(); k != nil || !strings.Contains(why, "GPTLAB_BF16=off") {
		t.Errorf("GPTLAB_BF16=off: amxKernel() = %v, %q", k, why)
	}
}
