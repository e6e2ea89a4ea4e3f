package planner

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// loadMiniMallocCSV reads id,lower,upper,size rows; it is the tests' own
// reader, independent of the package's.
func loadMiniMallocCSV(t testing.TB, path string) []Buffer {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var bufs []Buffer
	for k, r := range rows[1:] {
		var v [3]int64
		for j := range v {
			if v[j], err = strconv.ParseInt(r[j+1], 10, 64); err != nil {
				t.Fatalf("%s row %d: %v", path, k+2, err)
			}
		}
		bufs = append(bufs, Buffer{ID: r[0], Start: v[0], End: v[1], Size: v[2]})
	}
	return bufs
}

// verifyOffsets is an independent check of a plan: every offset aligned and
// non-negative, no two buffers live at a common step share a byte, and peak
// is the top of the highest buffer (sizes rounded up to align).
func verifyOffsets(bufs []Buffer, align int64, off []int64, peak int64) error {
	if len(off) != len(bufs) {
		return fmt.Errorf("%d offsets for %d buffers", len(off), len(bufs))
	}
	top := int64(0)
	for i, b := range bufs {
		if off[i] < 0 || off[i]%align != 0 {
			return fmt.Errorf("buffer %d: offset %d not a non-negative multiple of %d", i, off[i], align)
		}
		sz := (b.Size + align - 1) / align * align
		top = max(top, off[i]+sz)
		for j := range i {
			c := bufs[j]
			szc := (c.Size + align - 1) / align * align
			if b.Start < c.End && c.Start < b.End && off[i] < off[j]+szc && off[j] < off[i]+sz {
				return fmt.Errorf("buffers %d and %d overlap in time and space", j, i)
			}
		}
	}
	if top != peak {
		return fmt.Errorf("peak %d, but the highest buffer tops at %d", peak, top)
	}
	return nil
}

// liveMax is the most bytes live at one instant, computed naively.
func liveMax(bufs []Buffer, align int64) int64 {
	best := int64(0)
	for _, b := range bufs {
		t := int64(0)
		for _, c := range bufs {
			if c.Start <= b.Start && b.Start < c.End {
				t += (c.Size + align - 1) / align * align
			}
		}
		best = max(best, t)
	}
	return best
}
