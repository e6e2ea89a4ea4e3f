package models

import (
	"math/rand/v2"
	"testing"
)

// benchData is baby's MLP activation: B*T = 768 rows of 4C = 512.
func benchData(n int) []float32 {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func BenchmarkGELU(b *testing.B) {
	x := benchData(768 * 512)
	y := make([]float32, len(x))
	b.Run("forward/erf", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			geluForward(y, x)
		}
	})
	b.Run("forward/fast", func(b *testing.B) {
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			geluForward32(y, x)
		}
	})
	b.Run("backward", func(b *testing.B) {
		fy := make([]float32, len(x))
		geluForward32(fy, x)
		b.SetBytes(int64(4 * len(x)))
		for b.Loop() {
			geluBackward(y, x, fy, x, expFast)
		}
	})
}

func BenchmarkLayerNorm(b *testing.B) {
	const N, C = 768, 128
	x := benchData(N * C)
	w, bias := benchData(C), benchData(C)
	y := make([]float32, len(x))
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			lnForward(y, x, w, bias)
		}
	})
	b.Run("backward", func(b *testing.B) {
		dw := make([]float32, C)
		for b.Loop() {
			lnBackwardX(y, x, w, x)
			lnBackwardW(dw, x, x)
		}
	})
}

func BenchmarkCausalSoftmax(b *testing.B) {
	const N, T = 48, 64
	s := benchData(N * T * T)
	y := make([]float32, len(s))
	b.Run("forward", func(b *testing.B) {
		for b.Loop() {
			causalSoftmaxForward(y, s, T, 0, 0.17, expFast)
		}
	})
	b.Run("backward", func(b *testing.B) {
		d := make([]float32, len(s))
		for b.Loop() {
			causalSoftmaxBackward(d, y, s, T, 0, 0.17)
		}
	})
}

func BenchmarkCrossEntropy(b *testing.B) {
	const N, V = 768, 65
	l := benchData(N * V)
	t := make([]int, N)
	for i := range t {
		t[i] = i % V
	}
	d := make([]float32, len(l))
	for b.Loop() {
		xentForward(l, t, V, expFast)
		xentBackward(d, l, t, V, 1.0/N, expFast)
	}
}
