package bf16gemm

import "testing"

// TestPaths logs the paths this machine runs and why AMX is or is not one.
func TestPaths(t *testing.T) {
	ok, why := AMXStatus()
	t.Logf("paths %v (%s); AMX available: %v %s", Paths(), Path(), ok, why)
	ps := Paths()
	if len(ps) == 0 || ps[0] != "widen" {
		t.Fatalf("Paths() = %v, want widen first", ps)
	}
	if ok != (ps[len(ps)-1] == "amx") {
		t.Fatalf("AMXStatus() = %v but Paths() = %v", ok, ps)
	}
}
