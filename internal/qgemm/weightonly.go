package qgemm

import (
	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
)

// panelBytes bounds the float32 scratch of the dequantized columns of W.
const panelBytes = 512 << 10

// WeightOnly computes y = x·Wᵀ in float32 arithmetic from the int8
// codes: x (m, K) row-major, y (m, N) overwritten. At m == 1 a GEMV reads
// the codes directly, converting them to float32 in registers, and scales
// each column's (or block's) sum. For m > 1, W is dequantized as many
// 16-column panels at a time as fit in 512 KiB of float32 (at least one)
// into a [K, columns] scratch, which internal/sgemm's Sgemm multiplies
// into y's columns. It panics on bad lengths. A warm call allocates
// nothing.
func WeightOnly(y, x []float32, m int, w *Weights) {
	weightOnly(active.Load(), y, x, m, w)
}

func weightOnly(k *kernel, y, x []float32, m int, w *Weights) {
	checkArgs("WeightOnly", y, x, m, w)
	if m == 0 {
		return
	}
	s := getScratch()
	if m == 1 {
		s.grow(0, 0, w.kp)
		xp := s.wf[:w.kp] // x padded with zeros to the packed depth
		copy(xp, x)
		clear(xp[w.k:])
		c := &s.call
		*c = call{gemv: true, k: k, w: w, y: y, x: xp, nv: k.gemvNV}
		c.groups = (w.np + c.nv - 1) / c.nv
		c.run(s, threadsFor(1, w.n, w.k, c.groups))
		*c = call{}
		putScratch(s)
		return
	}
	nc := max(panelBytes/4/w.kp/panelW, 1) * panelW
	s.grow(0, 0, nc*w.kp)
	for j0 := 0; j0 < w.n; j0 += nc {
		jn := min(nc, w.n-j0)
		for c := 0; c < jn; c += panelW {
			k.dequant(s.wf[c:], nc, w, (j0+c)/panelW)
		}
		sgemm.Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, m, jn, w.k, 1, x, w.k, s.wf, nc, 0, y[j0:], w.n)
	}
	putScratch(s)
}

// gemvGroup computes panels g·nv.. of the GEMV on scratch s.
func (c *call) gemvGroup(s *scratch, g int) {
	w := c.w
	p0 := g * c.nv
	nv := min(c.nv, w.np-p0)
	cols := min(nv*panelW, w.n-p0*panelW)
	if cols == nv*panelW {
		c.k.gemv(c.y[p0*panelW:], c.x, w, p0, nv)
		return
	}
	if len(s.t) < maxTile {
		s.t = make([]float32, maxTile)
	}
	c.k.gemv(s.t, c.x, w, p0, nv)
	copy(c.y[p0*panelW:][:cols], s.t)
}

// gemvGo is the M=1 weight-only product in Go for panels p0..p0+nv-1:
// y[j] = Σ_b sw[b,j]·Σ_{k in b} x[k]·code[j,k], into y[:16·nv].
func gemvGo(y, x []float32, w *Weights, p0, nv int) {
	kqb := w.bk / kGroup
	for v := range nv {
		p := p0 + v
		b := w.codes[p*w.kp*panelW:]
		for c := range panelW {
			var acc float32
			for blk := range w.nb {
				var sum float32
				for g := blk * kqb; g < (blk+1)*kqb; g++ {
					q := b[(g*panelW+c)*kGroup:][:kGroup]
					xs := x[g*kGroup:][:kGroup]
					sum += xs[0]*float32(q[0]) + xs[1]*float32(q[1]) + xs[2]*float32(q[2]) + xs[3]*float32(q[3])
				}
				acc += sum * w.scales[(blk*w.bs+p)*panelW+c]
			}
			y[v*panelW+c] = acc
		}
	}
}

// dequantGo writes panel p of W dequantized into dst as rows of a
// [kp, ldd] matrix: dst[k·ldd + c] = float32(code[16p+c, k])·scale, for
// c < 16.
func dequantGo(dst []float32, ldd int, w *Weights, p int) {
	b := w.codes[p*w.kp*panelW:]
	for g := range w.kp / kGroup {
		sw := w.scales[((g*kGroup/w.bk)*w.bs+p)*panelW:][:panelW]
		for c := range panelW {
			q := b[(g*panelW+c)*kGroup:][:kGroup]
			for d, v := range q {
				dst[(g*kGroup+d)*ldd+c] = float32(v) * sw[c]
			}
		}
	}
}
