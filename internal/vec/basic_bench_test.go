package vec

import (
	"fmt"
	"math"
	"testing"

	"gptlab/internal/testutil"
)

// The benchmarks run each op at the model's sizes (C = 768, T*B rows of
// 128 or 512, 809856 parameters in the AdamW split) as two sub-benchmarks,
// "avx2" (the public API) and "go" (the fallback), so that their ratio is
// measured within one run. SetBytes counts the bytes read and written.

// benchPair runs avx2 and goFn as the sub-benchmarks "avx2" and "go".
func benchPair(b *testing.B, bytes int64, avx2, goFn func()) {
	b.Run("avx2", func(b *testing.B) {
		if !basicAVX2 {
			b.Skip("no AVX2 kernels on this CPU/build")
		}
		b.ReportAllocs()
		b.SetBytes(bytes)
		for b.Loop() {
			avx2()
		}
	})
	b.Run("go", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(bytes)
		for b.Loop() {
			goFn()
		}
	})
}

func BenchmarkAdd(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const n = 768 * 128
	r := basicRand(1)
	dst, x, y := make([]float32, n), basicData(r, n, false), basicData(r, n, false)
	benchPair(b, 3*4*n, func() { Add(dst, x, y) }, func() { addGo(dst, x, y) })
}

func BenchmarkMul(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const n = 768 * 128
	r := basicRand(1)
	dst, x, y := make([]float32, n), basicData(r, n, false), basicData(r, n, false)
	benchPair(b, 3*4*n, func() { Mul(dst, x, y) }, func() { mulGo(dst, x, y) })
}

func BenchmarkAddRow(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const rows, cols = 768, 512
	r := basicRand(2)
	dst, x, bias := make([]float32, rows*cols), basicData(r, rows*cols, false), basicData(r, cols, false)
	benchPair(b, 2*4*rows*cols, func() { AddRow(dst, x, bias) }, func() { addRowGo(dst, x, bias) })
}

func BenchmarkAccumF64(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const n = 768 * 512
	r := basicRand(3)
	acc, x := make([]float64, n), basicData(r, n, false)
	benchPair(b, (4+2*8)*n, func() { AccumF64(acc, x) }, func() { accumF64Go(acc, x) })
}

func BenchmarkAdamWUpdate(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	const n = 809856
	r := basicRand(4)
	st := newAdamwState(r, n, false)
	s := vecStep(newModelsStep(1e-3, 0.9, 0.95, 1e-8, 10, 1), 0.1)
	// The same state is updated again and again; its values stay finite
	// for the benchmark's few thousand steps at lr 1e-3.
	benchPair(b, (4+3)*4*n, func() { s.Update(st.w, st.g, st.m, st.v) }, func() { adamwGo(&s, st.w, st.g, st.m, st.v) })
}

// BenchmarkAccumRows sums the columns of a bias gradient of the baby
// step's halves (384 rows of 64 and 128 columns: a column block of the
// ColSum op) in float64, f32 and bf16 rows, on the AVX-512 kernels
// ("avx512", where the CPU has them), the AVX2 kernels and the fallback.
func BenchmarkAccumRows(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, cols := range []int{64, 128} {
		const rows = 384
		r := basicRand(5)
		x := basicData(r, rows*cols, false)
		x16 := make([]uint16, len(x))
		for i, v := range x {
			x16[i] = uint16(math.Float32bits(v) >> 16)
		}
		acc := make([]float64, cols)
		for _, in := range []struct {
			name        string
			bytes       int64
			kernel, fbk func()
		}{
			{"f32", 4 * rows * int64(cols), func() { AccumRowsF64(acc, x, rows, cols) }, func() { accumRowsF64Go(acc, x, rows, cols) }},
			{"bf16", 2 * rows * int64(cols), func() { AccumRowsBF16F64(acc, x16, rows, cols) }, func() { accumRowsBF16F64Go(acc, x16, rows, cols) }},
		} {
			b.Run(fmt.Sprintf("%s/%dx%d", in.name, rows, cols), func(b *testing.B) {
				b.Run("avx512", func(b *testing.B) {
					if !accumZ || !basicAVX2 {
						b.Skip("no AVX-512 column sums on this CPU/build")
					}
					b.ReportAllocs()
					b.SetBytes(in.bytes)
					for b.Loop() {
						in.kernel()
					}
				})
				saved := accumZ
				accumZ = false
				defer func() { accumZ = saved }()
				benchPair(b, in.bytes, in.kernel, in.fbk)
			})
		}
	}
}
