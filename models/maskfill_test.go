package models

import (
	"slices"
	"testing"

	"gptlab/models/ops"
)

// TestMaskFill: the filler's masks, cut into blocks across the pool, are
// ops.DropoutMask's bit for bit, for masks of several blocks and their
// partial last ones, and a recomputation's mask (a later one of the same
// layer and site) is the first's; one of another length is drawn, not
// copied. Filled again for another step, every mask changes with it.
func TestMaskFill(t *testing.T) {
	sizes := []struct{ layer, site, n int }{
		{0, SiteAttn, 3*maskBlockLen + 17}, {0, SiteMLP, maskBlockLen - 1}, {1, SiteAttn, 2 * maskBlockLen},
		{0, SiteAttn, 3*maskBlockLen + 17}, // the recomputation of the first
		{1, SiteAttn, 5},                   // the same site, another length
	}
	var masks []maskInput
	for _, s := range sizes {
		masks = append(masks, maskInput{data: make([]float32, s.n), layer: s.layer, site: s.site})
	}
	f := newMaskFill(masks)
	for _, step := range []int64{3, 4} {
		f.fill(0.2, 9, step)
		for i, mk := range masks {
			want := make([]float32, len(mk.data))
			ops.DropoutMask(want, 0.2, 9, step, mk.layer, mk.site)
			if !slices.Equal(mk.data, want) {
				t.Errorf("step %d: mask %d (layer %d, site %d, %d values) is not ops.DropoutMask's", step, i, mk.layer, mk.site, len(mk.data))
			}
		}
	}
	if got := len(f.copy); got != 4 {
		t.Errorf("%d blocks copied, want the recomputation's 4", got)
	}
}
