package ops

import (
	"math"
	"slices"
	"testing"

	"gptlab/internal/testutil"
)

func TestDropoutMask(t *testing.T) {
	const siteAttn, siteMLP = 1, 3 // two of models' sites
	const n = 100000
	a := make([]float32, n)
	DropoutMask(a, 0.25, 1, 2, 3, siteMLP)
	zeros := 0
	for _, v := range a {
		switch v {
		case 0:
			zeros++
		case float32(1 / 0.75):
		default:
			t.Fatalf("mask value %v, want 0 or 1/(1-p)", v)
		}
	}
	if f := float64(zeros) / n; math.Abs(f-0.25) > 0.01 {
		t.Errorf("dropped fraction %v, want 0.25 ± 0.01", f)
	}
	for _, tc := range []struct {
		name        string
		seed, step  int64
		layer, site int
		wantSame    bool
	}{
		{"same counters", 1, 2, 3, siteMLP, true},
		{"other seed", 2, 2, 3, siteMLP, false},
		{"other step", 1, 3, 3, siteMLP, false},
		{"other layer", 1, 2, 4, siteMLP, false},
		{"other site", 1, 2, 3, siteAttn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := make([]float32, n)
			DropoutMask(b, 0.25, tc.seed, tc.step, tc.layer, tc.site)
			if same := testutil.MaxAbsDiff(a, b) == 0; same != tc.wantSame {
				t.Errorf("mask equal to the reference mask: %v, want %v", same, tc.wantSame)
			}
		})
	}
	ones := make([]float32, 10)
	DropoutMask(ones, 0, 1, 1, 1, 1)
	for _, v := range ones {
		if v != 1 {
			t.Fatalf("p = 0 mask holds %v, want all ones", v)
		}
	}
}

// TestDropoutMaskAtPieces: a mask filled in pieces from their offsets is
// the whole mask, bit for bit; pieces filled from offset 0 each are not
// (the control).
func TestDropoutMaskAtPieces(t *testing.T) {
	const n = 10007
	want := make([]float32, n)
	DropoutMask(want, 0.3, 7, 8, 2, 1)
	for _, cuts := range [][]int{{0, n}, {0, 1, n}, {0, 4096, 8192, n}, {0, 17, 5000, 5001, n}} {
		got, wrong := make([]float32, n), make([]float32, n)
		for i := range cuts[1:] {
			lo, hi := cuts[i], cuts[i+1]
			DropoutMaskAt(got[lo:hi], 0.3, 7, 8, 2, 1, lo)
			DropoutMaskAt(wrong[lo:hi], 0.3, 7, 8, 2, 1, 0)
		}
		if !slices.Equal(got, want) {
			t.Errorf("cuts %v: the pieces differ from the whole mask", cuts)
		}
		if len(cuts) > 2 && slices.Equal(wrong, want) {
			t.Errorf("cuts %v: pieces all from offset 0 equal the whole mask", cuts)
		}
	}
}
