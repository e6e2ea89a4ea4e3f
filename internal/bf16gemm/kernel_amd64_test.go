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

// TestAMXWhereHardware: where the CPU and the OS give this process the
// tiles, the AMX path must pass its self-test. Without this a broken AMX
// kernel would only disable itself (AMXStatus saying why), and every
// other test would pass on the paths that remain.
func TestAMXWhereHardware(t *testing.T) {
	if ok, why := amxHardware(); !ok {
		t.Skipf("no AMX here: %s", why)
	}
	if err := amxPermission(); err != nil {
		t.Skipf("AMX tile data not granted: %v", err)
	}
	if k, why := amxKernel(); k == nil {
		t.Fatalf("the CPU and OS run AMX, but the AMX path is off: %s", why)
	}
}
