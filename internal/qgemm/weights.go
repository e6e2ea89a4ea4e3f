package qgemm

import (
	"fmt"

	"gptlab/internal/sgemm"

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
	bs     int // panels between the scale blocks of scales and corr (np, or the np of the matrix a view is of)
	scheme precision.Int8Scheme

	// codes: panel p, group g (4 depths), column c of the panel, depth
	// 4g+d at codes[((p·kp/4+g)·16+c)·4+d]; zero past N and K.
	codes []int8
	// scales and corr: block b, panel p, column c at [(b·bs+p)·16+c], so
	// that a kernel finds the panels of one block at fixed offsets.
	// corr is -128·Σ_{k in block} W[j,k], the start of the u8·s8
	// accumulators; scales is the scale of (column, block) (the tensor
	// scale repeated for the tensor scheme; 0 past N).
	scales []float32
	corr   []int32

	// packers are WeightOnly's sgemm.PackB for each of kernels, made
	// once (a closure made per call would allocate).
	packers []sgemm.PackB
}

// makePackers sets w.packers.
func (w *Weights) makePackers() {
	w.packers = make([]sgemm.PackB, len(kernels))
	for i, k := range kernels {
		w.packers[i] = func(dst []float32, nr, lastW, pc, jc, kb, nb int) { w.packB(k, dst, nr, lastW, pc, jc, kb, nb) }
	}
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
	w.bs = w.np
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
	w.makePackers()
	return w, nil
}

// N is the number of output channels (rows of W).
func (w *Weights) N() int { return w.n }

// K is the input dimension (columns of W).
func (w *Weights) K() int { return w.k }

// Scheme is the quantization scheme of the scales.
func (w *Weights) Scheme() precision.Int8Scheme { return w.scheme }

// Bytes is the resident size of the packed weights: codes (padding
// included), scales and the u8·s8 corrections (of its own rows, for a
// view).
func (w *Weights) Bytes() int { return len(w.codes) + 8*w.nb*w.np*panelW }

// Packed is the packed codes, laid out as PackedShape's rows of depth
// (panel p, dword group g, column c, byte d at ((p·kp/4+g)·16+c)·4+d),
// the kernels' operand: a graph that holds them as its input holds the
// one copy the kernels read. Do not modify them.
func (w *Weights) Packed() []int8 { return w.codes }

// PackedShape is the shape of Packed as a matrix: the rows padded to a
// multiple of 16 (panels of 16 channels) by the padded depth.
func (w *Weights) PackedShape() (rows, cols int) { return w.np * panelW, w.kp }

// Codes is W's codes unpacked, [N, K] row-major (a new slice).
func (w *Weights) Codes() []int8 {
	q := make([]int8, w.n*w.k)
	for j := range w.n {
		p, c := j/panelW, j%panelW
		for kk := range w.k {
			q[j*w.k+kk] = w.codes[((p*w.kp/kGroup+kk/kGroup)*panelW+c)*kGroup+kk%kGroup]
		}
	}
	return q
}

// DequantizeRow writes output channel j of W as float32, dst[k] =
// float32(code[j, k])·scale of (j, k), for k < K (an embedding row).
func (w *Weights) DequantizeRow(dst []float32, j int) {
	if j < 0 || j >= w.n || len(dst) != w.k {
		panic(fmt.Sprintf("qgemm: DequantizeRow %d of %d×%d into %d", j, w.n, w.k, len(dst)))
	}
	p, c := j/panelW, j%panelW
	b := w.codes[p*w.kp*panelW+c*kGroup:]
	for kk := range dst {
		sw := w.scales[((kk/w.bk)*w.bs+p)*panelW+c]
		dst[kk] = float32(b[(kk/kGroup)*kGroup*panelW+kk%kGroup]) * sw
	}
}

// Rows is output channels [lo, hi) of W as a Weights of its own sharing
// w's memory, when lo is a multiple of 16 and hi is too or is N (whole
// panels); ok is false otherwise.
func (w *Weights) Rows(lo, hi int) (v *Weights, ok bool) {
	if lo < 0 || hi > w.n || lo >= hi || lo%panelW != 0 || hi%panelW != 0 && hi != w.n {
		return nil, false
	}
	p0, p1 := lo/panelW, (hi+panelW-1)/panelW
	v = new(Weights)
	*v = *w
	v.n, v.np = hi-lo, p1-p0
	v.codes = w.codes[p0*panelW*w.kp : p1*panelW*w.kp : p1*panelW*w.kp]
	v.scales, v.corr = w.scales[p0*panelW:], w.corr[p0*panelW:]
	v.makePackers()
	return v, true
}
