package reports

import "testing"

// TestCount: a count reads as English: "1 rank", "2 ranks", "0 checks";
// a summary of one check does not say "all 1 checks".
func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 checks"}, {1, "1 check"}, {2, "2 checks"}, {132, "132 checks"}} {
		if got := Count(tc.n, "check"); got != tc.want {
			t.Errorf("Count(%d, check) = %q, want %q", tc.n, got, tc.want)
		}
	}
	r := New("x", "one check")
	r.Check("holds", true, "")
	if got := r.verdict(); got != "the check passed" {
		t.Errorf("summary of one passing check = %q, want %q", got, "the check passed")
	}
	r.Check("fails", false, "")
	if got := r.verdict(); got != "1 of 2 checks FAILED" {
		t.Errorf("summary = %q, want %q", got, "1 of 2 checks FAILED")
	}
}
