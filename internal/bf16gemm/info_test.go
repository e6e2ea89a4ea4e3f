package bf16gemm

import "testing"

// TestPaths logs the paths this machine runs and why AMX is or is not one.
func TestPaths(t *testing.T) {
	ok, why := AMXStatus()
	t.Logf("paths %v (default %s); AMX available: %v %s", Paths(), Path(), ok, why)
	if len(Paths()) == 0 || Paths()[0] != Path() {
		t.Fatalf("Paths() = %v, Path() = %q", Paths(), Path())
	}
	if ok != (Paths()[0] == "amx") {
		t.Fatalf("AMXStatus() = %v but Paths() = %v", ok, Paths())
	}
}
