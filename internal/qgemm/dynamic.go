package qgemm

import (
	"fmt"
	"math"

	"gptlab/precision"
)

// Dynamic computes y = x·Wᵀ with x quantized per row at run time: x is
// (m, K) float32 row-major, y (m, N) and overwritten. A row of x holding a
// NaN or an infinity gives a row of NaN. It panics on bad lengths, and
// with EnvError if GPTLAB_QGEMM named a kernel this machine lacks. A warm
// call allocates nothing.
func Dynamic(y, x []float32, m int, w *Weights) {
	dynamic(active.Load(), y, x, m, w)
}

func dynamic(k *kernel, y, x []float32, m int, w *Weights) {
	checkArgs("Dynamic", y, x, m, w)
	if m == 0 {
		return
	}
	s := getScratch()
	s.grow(m*w.kp, m, 0)
	a, sx := s.a[:m*w.kp], s.sx[:m]
	for i := range m {
		sx[i] = k.quant(a[i*w.kp:(i+1)*w.kp], x[i*w.k:(i+1)*w.k], k.unsigned)
	}
	sh := k.shapes[0]
	if w.nb > 1 {
		sh = k.shapes[1]
	}
	c := &s.call
	*c = call{k: k, w: w, y: y, a: a, sx: sx, m: m, mr: sh.mr, nv: sh.nv}
	if m == 1 {
		c.nv = sh.nv1
	}
	c.groups = (w.np + c.nv - 1) / c.nv
	c.run(threadsFor(m, w.n, w.k, c.groups))
	*c = call{} // keep no reference to the caller's slices
	putScratch(s)
}

// dynamicGroup computes panels g·nv.. of every row on scratch s.
func (c *call) dynamicGroup(s *scratch, g int) {
	w := c.w
	p0 := g * c.nv
	// The tile lives in the scratch: passed to an indirect call, a local
	// would escape.
	t := &s.tile
	*t = tile{lda: w.kp, pstr: w.kp * panelW, bstr: w.bs * panelW, nb: w.nb, kqb: w.bk / kGroup}
	t.nv = min(c.nv, w.np-p0)
	t.b = w.codes[p0*t.pstr:]
	t.corr, t.sw = w.corr[p0*panelW:], w.scales[p0*panelW:]
	cols := min(t.nv*panelW, w.n-p0*panelW)
	if cols == t.nv*panelW {
		// Whole panels: the full tiles of mr rows in one call, then the
		// rows left over.
		t.ldy = w.n
		for i0 := 0; i0 < c.m; i0 += t.mr * t.nt {
			t.mr = min(c.mr, c.m-i0)
			t.nt = (c.m - i0) / t.mr
			t.a, t.sx, t.y = c.a[i0*w.kp:], c.sx[i0:], c.y[i0*w.n+p0*panelW:]
			c.k.run(t)
		}
		*t = tile{}
		return
	}
	t.nt = 1
	for i0 := 0; i0 < c.m; i0 += c.mr {
		t.mr = min(c.mr, c.m-i0)
		t.a, t.sx = c.a[i0*w.kp:], c.sx[i0:]
		// The last panel is partial: compute into a tile and copy.
		if len(s.t) < maxTile {
			s.t = make([]float32, maxTile)
		}
		t.y, t.ldy = s.t[:t.mr*t.nv*panelW], t.nv*panelW
		c.k.run(t)
		for i := range t.mr {
			copy(c.y[(i0+i)*w.n+p0*panelW:][:cols], t.y[i*t.ldy:][:cols])
		}
	}
	*t = tile{}
}

func checkArgs(op string, y, x []float32, m int, w *Weights) {
	if envErr != nil {
		panic(envErr)
	}
	if m < 0 || len(x) != m*w.k || len(y) != m*w.n {
		panic(fmt.Sprintf("qgemm.%s: m %d, K %d, N %d: len(x) %d, len(y) %d", op, m, w.k, w.n, len(x), len(y)))
	}
}

// quantRowGo quantizes one row of activations in Go: quantRow without
// vector kernels.
func quantRowGo(dst []byte, x []float32, unsigned bool) float32 {
	return quantRow(dst, x, unsigned, 1, nil, nil)
}

// quantRow quantizes one row x of activations with precision's rule
// (precision.QuantizeInt8Vector) into dst (kp bytes; past len(x) the code
// 0), as int8 codes or, unsigned, as code+128. absMax and quant, if not
// nil, handle the first multiple of step elements: absMax returns the
// largest of the bits of |x[i]| (for finite non-negative floats the
// integer order is the float order, and NaN and Inf sort above every
// finite value), quant the codes; the rest is done here in Go.
func quantRow(dst []byte, x []float32, unsigned bool, step int,
	absMax func(x *float32, n int) uint32, quant func(dst *byte, x *float32, n int, scale float32, xor uint32)) float32 {
	var xr byte
	if unsigned {
		xr = 0x80
	}
	n := len(x) / step * step
	if absMax == nil {
		n = 0
	}
	var bits uint32
	if n > 0 {
		bits = absMax(&x[0], n)
	}
	for _, v := range x[n:] {
		bits = max(bits, math.Float32bits(v)&0x7fffffff)
	}
	if bits >= 0x7f800000 { // a NaN or an infinity: the row's result is NaN
		fill(dst, xr)
		return float32(math.NaN())
	}
	s := precision.Int8Scale(math.Float32frombits(bits))
	if s == 0 {
		fill(dst, xr)
		return 0
	}
	if n > 0 {
		quant(&dst[0], &x[0], n, s, uint32(xr)*0x01010101)
	}
	for i := n; i < len(x); i++ {
		dst[i] = byte(precision.RoundInt8(x[i], s)) ^ xr
	}
	fill(dst[len(x):], xr)
	return s
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}
