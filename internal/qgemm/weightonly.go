package qgemm

import (
	"gptlab/internal/sgemm"
)

// WeightOnly computes y = x·Wᵀ in float32 arithmetic from the int8
// codes: x (m, K) row-major, y (m, N) overwritten. At m == 1 a GEMV reads
// the codes directly, converting them to float32 in registers, and scales
// each column's (or block's) sum. For m > 1, internal/sgemm multiplies x
// by Wᵀ with the codes dequantized straight into its packed panels of B
// (sgemm.SgemmPackedB): the float32 arithmetic and the result of Sgemm on
// the dequantized matrix, without writing that matrix out for Sgemm to
// pack again. It panics on bad lengths. A warm call allocates nothing.
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
		c.run(threadsFor(1, w.n, w.k, c.groups))
		*c = call{}
		putScratch(s)
		return
	}
	putScratch(s)
	sgemm.SgemmPackedB(m, w.n, w.k, x, w.k, w.packers[k.index], y, w.n)
}

// packB is sgemm.PackB for Wᵀ (K×N) on kernel k's dequantizer: panels
// of 16 columns that start on a panel of W and end within W (or at its
// last column) are dequantized in place; any other (the pure-Go sgemm's
// panels of 4) through a scratch panel.
func (w *Weights) packB(k *kernel, dst []float32, nr, lastW, pc, jc, kb, nb int) {
	var s *scratch
	for jr := 0; jr < nb; jr += nr {
		wd := nr
		if jr+nr > nb {
			wd = lastW
		}
		nw := min(wd, nb-jr)
		panel := dst[(jr/nr)*kb*nr:][:kb*wd]
		j0 := jc + jr
		// Columns past N in W's last panel are zero codes, as the packing
		// wants them.
		if j0%panelW == 0 && wd%panelW == 0 && (nw%panelW == 0 || j0+nw == w.n) {
			for c := 0; c < wd; c += panelW {
				if c >= nw {
					clearCols(panel, wd, c, c+panelW)
					continue
				}
				k.dequant(panel[c:], wd, w, (j0+c)/panelW, pc, pc+kb)
			}
			continue
		}
		if s == nil {
			s = getScratch()
			s.grow(0, 0, kb*panelW)
		}
		qp := -1
		for c := range nw {
			if p := (j0 + c) / panelW; p != qp {
				qp = p
				k.dequant(s.wf, panelW, w, p, pc, pc+kb)
			}
			col := (j0 + c) % panelW
			for q := range kb {
				panel[q*wd+c] = s.wf[q*panelW+col]
			}
		}
		clearCols(panel, wd, nw, wd)
	}
	if s != nil {
		putScratch(s)
	}
}

// clearCols zeroes columns [c0, c1) of the rows of width wd of panel.
func clearCols(panel []float32, wd, c0, c1 int) {
	if c0 >= c1 {
		return
	}
	for q := 0; q < len(panel); q += wd {
		clear(panel[q+c0 : q+c1])
	}
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

// dequantGo writes depth [k0, k1) of panel p of W dequantized into dst
// as rows of a [k1-k0, ldd] matrix: dst[(k-k0)·ldd + c] =
// float32(code[16p+c, k])·scale, for c < 16.
func dequantGo(dst []float32, ldd int, w *Weights, p, k0, k1 int) {
	b := w.codes[p*w.kp*panelW:]
	for kk := k0; kk < k1; kk++ {
		sw := w.scales[((kk/w.bk)*w.bs+p)*panelW:][:panelW]
		row := dst[(kk-k0)*ldd:][:panelW]
		g, d := kk/kGroup, kk%kGroup
		for c := range panelW {
			row[c] = float32(b[(g*panelW+c)*kGroup+d]) * sw[c]
		}
	}
}
