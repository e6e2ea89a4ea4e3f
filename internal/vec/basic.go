package vec

import (
	"fmt"
	"math"
)

// This file holds the public API of the basic ops and their pure-Go
// fallbacks (the ...Go functions). The AVX2 kernels (basic_amd64.go)
// perform, element by element, the same IEEE float operations in the same
// order, so both paths give bitwise the same results (NaNs aside, whose
// payload may depend on operand order; a NaN stays a NaN). Every product
// the Go code adds to something is wrapped in an explicit float32(...):
// without it the compiler may fuse x*y+z into an FMA (it does under
// GOAMD64=v3), which rounds once instead of twice.
//
// Aliasing: dst may be the same slice as any input (element for element);
// partially overlapping slices are not supported.

// Add sets dst[i] = a[i] + b[i] for i < len(dst). It panics if a or b is
// shorter than dst.
func Add(dst, a, b []float32) {
	if len(a) < len(dst) || len(b) < len(dst) {
		panic(fmt.Sprintf("vec.Add: len(a) = %d, len(b) = %d, want >= len(dst) = %d", len(a), len(b), len(dst)))
	}
	add(dst, a[:len(dst)], b[:len(dst)])
}

// Mul sets dst[i] = a[i] * b[i] for i < len(dst). It panics if a or b is
// shorter than dst.
func Mul(dst, a, b []float32) {
	if len(a) < len(dst) || len(b) < len(dst) {
		panic(fmt.Sprintf("vec.Mul: len(a) = %d, len(b) = %d, want >= len(dst) = %d", len(a), len(b), len(dst)))
	}
	mul(dst, a[:len(dst)], b[:len(dst)])
}

// AddRow adds the row b to every row of x: dst[r*C+c] = x[r*C+c] + b[c]
// with C = len(b), as a bias add over a (rows, C) matrix. It panics unless
// len(x) == len(dst) and that is a multiple of C (C = 0 only with empty
// dst).
func AddRow(dst, x, b []float32) {
	if len(x) != len(dst) || (len(b) == 0 && len(dst) > 0) || (len(b) > 0 && len(dst)%len(b) != 0) {
		panic(fmt.Sprintf("vec.AddRow: len(dst) = %d, len(x) = %d, want equal and a multiple of len(b) = %d", len(dst), len(x), len(b)))
	}
	if len(dst) == 0 {
		return
	}
	addRow(dst, x, b)
}

// AccumF64 adds x to acc in float64: acc[i] += float64(x[i]) for
// i < len(acc). The conversion is exact, so each element is rounded once,
// by the add. It panics if x is shorter than acc.
func AccumF64(acc []float64, x []float32) {
	if len(x) < len(acc) {
		panic(fmt.Sprintf("vec.AccumF64: len(x) = %d, want >= len(acc) = %d", len(x), len(acc)))
	}
	accumF64(acc, x[:len(acc)])
}

// AccumRowsF64 adds rows rows of x, row r at x[r*ldx:], to acc in
// float64, rows in order: acc[i] += float64(x[r*ldx+i]) for i < len(acc),
// bitwise AccumF64 on each row in turn, with the sums kept in registers
// down the rows (a column sum of a matrix is one call). It panics if x
// does not hold the rows or ldx < len(acc) for more than one row.
func AccumRowsF64(acc []float64, x []float32, rows, ldx int) {
	if checkAccumRows("AccumRowsF64", len(acc), len(x), rows, ldx) {
		accumRowsF64(acc, x, rows, ldx)
	}
}

// checkAccumRows panics unless x (lenX values) holds rows rows of n at
// stride ldx, and reports whether there is anything to add.
func checkAccumRows(name string, n, lenX, rows, ldx int) bool {
	if rows < 0 || (rows > 1 && ldx < n) || (rows > 0 && lenX < (rows-1)*ldx+n) {
		panic(fmt.Sprintf("vec.%s: %d rows of %d at stride %d, len(x) = %d", name, rows, n, ldx, lenX))
	}
	return rows > 0 && n > 0
}

// AccumRowsBF16F64 is AccumRowsF64 on rows of bf16 bits, each widened
// exactly to float32 (its bits above 16 zero bits) before it is added:
// bitwise AccumRowsF64 on the rows' cast up, with no float32 copy made.
func AccumRowsBF16F64(acc []float64, x []uint16, rows, ldx int) {
	if checkAccumRows("AccumRowsBF16F64", len(acc), len(x), rows, ldx) {
		accumRowsBF16F64(acc, x, rows, ldx)
	}
}

// AdamW holds the scalars of one AdamW step, all float32 (the caller
// computes them, e.g. the bias corrections in float64, and rounds once).
type AdamW struct {
	Decay    float32 // w is multiplied by it first: 1 - lr*weightDecay, or 1 for none
	Clip     float32 // gradient scale from global-norm clipping (1 for none)
	B1, C1   float32 // beta1 and 1 - beta1
	B2, C2   float32 // beta2 and 1 - beta2
	Bc2Sqrt  float32 // sqrt(1 - beta2^t)
	Eps      float32 // added to the denominator
	StepSize float32 // lr / (1 - beta1^t)
}

// Update applies the step to the parameters w with gradients g and
// moments m, v (all of the same length), element by element, as
//
//	w = w*Decay                (a Decay of 1 leaves w bit-identical)
//	gj = g*Clip
//	m = B1*m + C1*gj           (two rounded products, then the sum)
//	v = B2*v + (C2*gj)*gj
//	denom = sqrt(v)/Bc2Sqrt + Eps
//	w = w - (StepSize*m)/denom
//
// with every operation rounded to float32 (sqrt correctly rounded, no
// fused multiply-add). It panics if the lengths differ.
func (s *AdamW) Update(w, g, m, v []float32) {
	if len(g) != len(w) || len(m) != len(w) || len(v) != len(w) {
		panic(fmt.Sprintf("vec.AdamW.Update: lengths w %d, g %d, m %d, v %d, want equal", len(w), len(g), len(m), len(v)))
	}
	adamw(s, w, g, m, v)
}

// addGo is the fallback of Add; the slices have equal lengths.
func addGo(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// mulGo is the fallback of Mul; the slices have equal lengths.
func mulGo(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

// addRowGo is the fallback of AddRow; len(b) > 0 divides len(dst) ==
// len(x).
func addRowGo(dst, x, b []float32) {
	x = x[:len(dst)]
	for r := 0; r < len(dst); r += len(b) {
		addGo(dst[r:r+len(b)], x[r:r+len(b)], b)
	}
}

// accumF64Go is the fallback of AccumF64; the slices have equal lengths.
func accumF64Go(acc []float64, x []float32) {
	x = x[:len(acc)]
	for i := range acc {
		acc[i] += float64(x[i])
	}
}

// accumRowsF64Go is the fallback of AccumRowsF64.
func accumRowsF64Go(acc []float64, x []float32, rows, ldx int) {
	for r := range rows {
		accumF64Go(acc, x[r*ldx:])
	}
}

// accumRowsBF16F64Go is the fallback of AccumRowsBF16F64.
func accumRowsBF16F64Go(acc []float64, x []uint16, rows, ldx int) {
	for r := range rows {
		for i, v := range x[r*ldx:][:len(acc)] {
			acc[i] += float64(math.Float32frombits(uint32(v) << 16))
		}
	}
}

// adamwGo is the fallback of AdamW.Update; the slices have equal lengths.
func adamwGo(s *AdamW, w, g, m, v []float32) {
	g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
	for i := range w {
		wi := float32(w[i] * s.Decay)
		gj := float32(g[i] * s.Clip)
		mi := float32(s.B1*m[i]) + float32(s.C1*gj)
		vi := float32(s.B2*v[i]) + float32(float32(s.C2*gj)*gj)
		denom := float32(math.Sqrt(float64(vi)))/s.Bc2Sqrt + s.Eps
		m[i], v[i] = mi, vi
		w[i] = wi - float32(s.StepSize*mi)/denom
	}
}
