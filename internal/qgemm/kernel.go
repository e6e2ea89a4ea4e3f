package qgemm

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"gptlab/internal/sgemm"
)

// EnvPath is the environment variable that forces the kernels
// ("go", "avx2", "avxvnni", "avx512vnni"), for comparisons: Dynamic's,
// and WeightOnly's of the same instruction set (AVX-512 for avx512vnni,
// AVX2 for avxvnni and avx2).
const EnvPath = "GPTLAB_QGEMM"

// kernel is one implementation of Dynamic's tile contract (see tile).
type kernel struct {
	name     string
	index    int          // in kernels
	unsigned bool         // activations stored as code+128 (u8); accumulators start at corr
	shapes   [2]tileShape // largest tiles: one block per column (channel, tensor), blocks (block32)
	run      func(t *tile)
	quant    func(dst []byte, x []float32, unsigned bool) float32 // one activation row

	// The weight-only kernels of the same instruction set: gemv computes
	// panels p0..p0+nv-1 (nv ≤ gemvNV) of y = x·Wᵀ for one row x padded
	// to kp; dequant writes depth [k0, k1) of panel p dequantized as rows
	// of a [k1-k0, ldd] matrix, k0 a multiple of the scale block (32) for
	// block32, of 4 otherwise (see gemvGo and dequantGo).
	gemv    func(y, x []float32, w *Weights, p0, nv int)
	gemvNV  int
	dequant func(dst []float32, ldd int, w *Weights, p, k0, k1 int)
	wname   string // the weight-only kernels' instruction set
}

// tileShape is a kernel's largest tile: mr rows of nv panels, or one row
// of nv1 panels.
type tileShape struct{ mr, nv, nv1 int }

// tile is one call of a kernel: rows i0.. of the activations against
// panels p0.. of the weights, as nt tiles of mr rows each (one call
// for a column of tiles, the kernel stepping a, sx and y itself). For
// each of the mr·nt rows i and 16·nv columns
// j of the tile, with acc_b the int32 sum over the kqb dword groups of
// block b of a[i, k]·code[j, k] started at corr[b, j] (unsigned kernels,
// whose a is code+128) or at 0 (signed ones):
//
//	f = +0; f = f + float32(acc_b)·sw[b, j] for b = 0..nb-1
//	y[i·ldy + j] = f·sx[i]
//
// each product and sum rounded to float32 (no fused multiply-add).
type tile struct {
	a      []byte    // activations of row i0: row i at a[i·lda:], kp bytes
	lda    int       //
	b      []int8    // codes of panel p0; panel p0+v at b[v·pstride:]
	pstr   int       // bytes between panels: kp·16
	corr   []int32   // of panel p0: block b, column c of panel v at [b·bstr + v·16 + c]
	sw     []float32 // the scales, laid out as corr
	bstr   int       // np·16: elements between blocks
	sx     []float32 // row scales from i0
	y      []float32 // output from (i0, 16·p0)
	ldy    int       //
	mr, nv int       // tile rows and panels
	nt     int       // tiles of mr rows, one after the other
	nb     int       // blocks per column
	kqb    int       // dword groups per block (bk/4)
}

var goKernel = &kernel{name: "go", shapes: [2]tileShape{{4, 2, 4}, {4, 2, 4}}, run: tileGo, quant: quantRowGo,
	gemv: gemvGo, gemvNV: 4, dequant: dequantGo, wname: "go"}

var (
	kernels = append(archKernels(), goKernel)
	active  atomic.Pointer[kernel]
	envErr  error
)

func init() {
	for i, k := range kernels {
		k.index = i
	}
	active.Store(kernels[0])
	envErr = pathFromEnv(os.Getenv(EnvPath))
}

// pathFromEnv applies the value of GPTLAB_QGEMM ("" leaves the best
// kernel).
func pathFromEnv(name string) error {
	if name == "" {
		return nil
	}
	if err := SetPath(name); err != nil {
		return fmt.Errorf("qgemm: %s=%s: %w", EnvPath, name, err)
	}
	return nil
}

// EnvError reports a bad GPTLAB_QGEMM (an unknown kernel or one this CPU
// lacks). Commands check it at start; Dynamic panics with it rather than
// run another kernel than the one asked for.
func EnvError() error { return envErr }

// SetPath makes Dynamic and WeightOnly use the kernels called name; it
// fails, naming the kernels this machine runs, if the CPU lacks them.
func SetPath(name string) error {
	for _, k := range kernels {
		if k.name == name {
			active.Store(k)
			return nil
		}
	}
	known := false
	for _, n := range []string{"go", "avx2", "avxvnni", "avx512vnni"} {
		known = known || n == name
	}
	if !known {
		return fmt.Errorf("unknown int8 kernel %q (want one of go, avx2, avxvnni, avx512vnni)", name)
	}
	return fmt.Errorf("int8 kernel %q not available on this CPU (have %s)", name, strings.Join(Paths(), ", "))
}

// Paths lists the kernels of Dynamic this machine runs, best first.
func Paths() []string {
	names := make([]string, len(kernels))
	for i, k := range kernels {
		names[i] = k.name
	}
	return names
}

// Path names Dynamic's kernel: "avx512vnni", "avxvnni", "avx2" or "go".
func Path() string { return active.Load().name }

// Kernels names the chosen kernels of both paths for reports, e.g.
// "dynamic=avx512vnni weight-only=avx512+sgemm/avx512" (the weight-only
// GEMV and dequantization, then the float32 GEMM for M > 1).
func Kernels() string {
	k := active.Load()
	return fmt.Sprintf("dynamic=%s weight-only=%s+sgemm/%s", k.name, k.wname, sgemm.Kernel())
}

// tileGo is the tile contract in Go on signed activations (the layout
// of the Go and AVX2 kernels): a panel's 16 accumulators advance together,
// a dword group (64 bytes of codes) at a time.
func tileGo(t *tile) {
	for i := range t.mr * t.nt {
		a := t.a[i*t.lda:]
		for v := range t.nv {
			b := t.b[v*t.pstr:]
			var f [panelW]float32
			for blk := range t.nb {
				var acc [panelW]int32
				for g := blk * t.kqb; g < (blk+1)*t.kqb; g++ {
					a4 := a[g*kGroup : g*kGroup+kGroup]
					a0, a1, a2, a3 := int32(int8(a4[0])), int32(int8(a4[1])), int32(int8(a4[2])), int32(int8(a4[3]))
					bg := b[g*kGroup*panelW : (g+1)*kGroup*panelW]
					for c := range panelW {
						q := bg[c*kGroup : c*kGroup+kGroup]
						acc[c] += a0*int32(q[0]) + a1*int32(q[1]) + a2*int32(q[2]) + a3*int32(q[3])
					}
				}
				sw := t.sw[blk*t.bstr+v*panelW:][:panelW]
				for c := range panelW {
					// The conversion keeps the compiler from fusing the
					// product with the sum (the kernels round both).
					f[c] += float32(float32(acc[c]) * sw[c])
				}
			}
			y := t.y[i*t.ldy+v*panelW:][:panelW]
			for c := range panelW {
				y[c] = f[c] * t.sx[i]
			}
		}
	}
}
