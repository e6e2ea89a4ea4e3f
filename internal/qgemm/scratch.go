package qgemm

import "gptlab/internal/par"

// scratch holds one call's buffers: the quantized activations, their row
// scales, a tile for partial panels and a dequantized panel of W. Buffers
// grow to the largest call seen and are kept on a free list (a par.Free,
// not a sync.Pool, which garbage collections empty), so a warm call
// allocates nothing.
type scratch struct {
	a    []byte
	sx   []float32
	t    []float32
	wf   []float32
	tile tile
	call call
}

var scratchFree par.Free[scratch]

func getScratch() *scratch {
	if s := scratchFree.Get(); s != nil {
		return s
	}
	return new(scratch)
}

func putScratch(s *scratch) { scratchFree.Put(s) }

// grow makes room for na activation bytes, m rows and a dequantized panel
// of nw floats.
func (s *scratch) grow(na, m, nw int) {
	if len(s.a) < na {
		s.a = make([]byte, na)
	}
	if len(s.sx) < m {
		s.sx = make([]float32, m)
	}
	if len(s.t) < maxTile {
		s.t = make([]float32, maxTile)
	}
	if len(s.wf) < nw {
		s.wf = make([]float32, nw)
	}
}

// maxTile is the largest tile of any kernel (rows × columns).
const maxTile = 8 * 8 * panelW
