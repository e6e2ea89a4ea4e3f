package qgemm

import (
	"fmt"
	"unsafe"

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
	mrMax, nvMax := k.mr, k.nv
	if m == 1 {
		nvMax = k.nv1
	}
	// The tile lives in the scratch: passed to an indirect call, a local
	// would escape.
	t := &s.tile
	*t = tile{lda: w.kp, pstr: w.kp * panelW, cstr: w.nb * panelW, nb: w.nb, kqb: w.bk / kGroup}
	for p0 := 0; p0 < w.np; p0 += nvMax {
		t.nv = min(nvMax, w.np-p0)
		t.b = w.codes[p0*t.pstr:]
		t.corr, t.sw = w.corr[p0*t.cstr:], w.scales[p0*t.cstr:]
		cols := min(t.nv*panelW, w.n-p0*panelW)
		for i0 := 0; i0 < m; i0 += mrMax {
			t.mr = min(mrMax, m-i0)
			t.a, t.sx = a[i0*w.kp:], sx[i0:]
			if cols == t.nv*panelW {
				t.y, t.ldy = y[i0*w.n+p0*panelW:], w.n
				k.run(t)
				continue
			}
			// The last panel is partial: compute into a tile and copy.
			t.y, t.ldy = s.t[:t.mr*t.nv*panelW], t.nv*panelW
			k.run(t)
			for i := range t.mr {
				copy(y[(i0+i)*w.n+p0*panelW:][:cols], t.y[i*t.ldy:][:cols])
			}
		}
	}
	*t = tile{} // keep no reference to the caller's slices
	putScratch(s)
}

func checkArgs(op string, y, x []float32, m int, w *Weights) {
	if envErr != nil {
		panic(envErr)
	}
	if m < 0 || len(x) != m*w.k || len(y) != m*w.n {
		panic(fmt.Sprintf("qgemm.%s: m %d, K %d, N %d: len(x) %d, len(y) %d", op, m, w.k, w.n, len(x), len(y)))
	}
}

// quantRowGo quantizes one row of activations with precision's rule into
// dst (kp bytes; past len(x) the code 0), as int8 or, unsigned, as
// code+128.
func quantRowGo(dst []byte, x []float32, unsigned bool) float32 {
	q := unsafe.Slice((*int8)(unsafe.Pointer(&dst[0])), len(dst))
	s := precision.QuantizeInt8Vector(q, x)
	clear(q[len(x):])
	if unsigned {
		for i := range dst {
			dst[i] ^= 0x80
		}
	}
	return s
}
