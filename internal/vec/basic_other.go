//go:build !amd64 || purego

package vec

// basicAVX2 is false: this build has no assembly kernels.
var basicAVX2 = false

// accumZ is false: this build has no AVX-512 column sums.
var accumZ = false

func add(dst, a, b []float32) { addGo(dst, a, b) }

func mul(dst, a, b []float32) { mulGo(dst, a, b) }

func addRow(dst, x, b []float32) { addRowGo(dst, x, b) }

func accumF64(acc []float64, x []float32) { accumF64Go(acc, x) }

func accumRowsF64(acc []float64, x []float32, rows, ldx int) { accumRowsF64Go(acc, x, rows, ldx) }

func accumRowsBF16F64(acc []float64, x []uint16, rows, ldx int) {
	accumRowsBF16F64Go(acc, x, rows, ldx)
}

func adamw(s *AdamW, w, g, m, v []float32) { adamwGo(s, w, g, m, v) }
