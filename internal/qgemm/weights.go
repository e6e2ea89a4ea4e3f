package qgemm

import (
	"fmt"

	"gptlab/precision"
)

// Packing constants.
const (
	panelW = 16 // output channels per packed panel
	kGroup = 4  // codes per dword
	kAlign = 16 // the depth of channel and tensor schemes is padded to this
)

// MaxK is the largest depth NewWeights takes: the int32 accumulators of
// the u8·s8 kernels (|Σ| ≤ (255+128)·127·K) must not overflow.
const MaxK = 32768

// Weights is an int8 weight matrix W [N, K] packed for the kernels. It is
// immutable once made and safe for concurrent use.
type Weights struct {
	n, k   int
	kp     int // padded depth: nb·bk
	bk     int // depth of one scale block (kp for channel and tensor)
	nb     int // scale blocks per column
	np     int // panels: ceil(N/16)
	scheme precision.Int8Scheme

	// codes: panel p, group g (4 depths), column c of the panel, depth
	// 4g+d at codes[((p·kp/4+g)·16+c)·4+d]; zero past N and K.
	codes []int8
	// scales and corr: block b, panel p, column c at [(b·np+p)·16+c], so
	// that a kernel finds the panels of one block at fixed offsets.
	// corr is -128·Σ_{k in block} W[j,k], the start of the u8·s8
	// accumulators; scales is the scale of (column, block) (the tensor
	// scale repeated for the tensor scheme; 0 past N).
	scales []float32
	corr   []int32
}

// NewWeights packs the codes q (n·k, row-major [N, K]: row j is output
// channel j) and scales (scheme.NumScales(n, k), as precision.QuantizeInt8
// returns them). It checks them with precision.ValidateInt8.
func NewWeights(n, k int, q []int8, scales []float32, scheme precision.Int8Scheme) (*Weights, error) {
	if err := precision.ValidateInt8("qgemm weights", q, scales, n, k, scheme); err != nil {
		return nil, err
	}
	if n <= 0 || k <= 0 || k > MaxK {
		return nil, fmt.Errorf("qgemm: weights %d×%d: want N ≥ 1 and 1 ≤ K ≤ %d", n, k, MaxK)
	}
	w := &Weights{n: n, k: k, scheme: scheme, np: (n + panelW - 1) / panelW}
	if scheme == precision.Int8PerBlock32 {
		w.bk, w.nb = precision.Int8BlockSize, precision.Int8Blocks(k)
		w.kp = w.nb * w.bk
	} else {
		w.kp = (k + kAlign - 1) / kAlign * kAlign
		w.bk, w.nb = w.kp, 1
	}
	w.codes = make([]int8, w.np*panelW*w.kp)
	w.scales = make([]float32, w.np*w.nb*panelW)
	w.corr = make([]int32, len(w.scales))
	for j := range n {
		p, c := j/panelW, j%panelW
		row := q[j*k : (j+1)*k]
		for kk, v := range row {
			w.codes[((p*w.kp/kGroup+kk/kGroup)*panelW+c)*kGroup+kk%kGroup] = v
			w.corr[((kk/w.bk)*w.np+p)*panelW+c] -= 128 * int32(v)
		}
		for b := range w.nb {
			w.scales[(b*w.np+p)*panelW+c] = scales[scheme.ScaleIndex(j, b*w.bk, k)]
		}
	}
	return w, nil
}

// N is the number of output channels (rows of W).
func (w *Weights) N() int { return w.n }

// K is the input dimension (columns of W).
func (w *Weights) K() int { return w.k }

// Scheme is the quantization scheme of the scales.
func (w *Weights) Scheme() precision.Int8Scheme { return w.scheme }

// Bytes is the resident size of the packed weights: codes (padding
// included), scales and the u8·s8 corrections.
func (w *Weights) Bytes() int { return len(w.codes) + 4*len(w.scales) + 4*len(w.corr) }
