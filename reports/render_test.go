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

// TestConfigCellExact: the config line shows a setting as --set takes it,
// a list of numbers too (rates=0.5,2,8 once printed as 0.5000,2,8).
func TestConfigCellExact(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{{0.5, "0.5"}, {[]float64{0.5, 2, 8}, "0.5,2,8"}, {[]float64{0.25, 1e-7}, "0.25,1e-07"}, {[]int{4, 16}, "4,16"}, {[]string{"a", "b"}, "a,b"}} {
		if got := configCell(tc.v); got != tc.want {
			t.Errorf("configCell(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
