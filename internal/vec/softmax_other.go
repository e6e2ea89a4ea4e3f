//go:build !amd64 || purego

package vec

// softmaxAVX2 is false: this build has no assembly kernels, and the
// primitives never call the stand-ins below.
var softmaxAVX2 = false

func expSumAVX2(y, x *float32, n int, scale, shift float32, acc *float64, tail *float32) {
	panic(noKernels)
}

func maxAVX2(x *float32, n int, m *float32) { panic(noKernels) }

func scaleAVX2(y, x *float32, n int, a float32) { panic(noKernels) }

func dotAVX2(a, b *float32, n int, ta, tb *float32) float64 { panic(noKernels) }
