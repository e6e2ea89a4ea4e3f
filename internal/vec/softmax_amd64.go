//go:build amd64 && !purego

package vec

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run -C asm/softmax . -out ../../softmax_amd64.s -stubs ../../softmax_amd64_stubs.go -pkg vec
//go:generate go run -C asm/softmax512 . -out ../../softmax512_amd64.s -stubs ../../softmax512_amd64_stubs.go -pkg vec

// softmaxAsm reports whether the softmax row primitives (softmax.go) run
// their AVX2+FMA kernels (softmax_amd64.s). x/sys/cpu reports AVX2 only
// when the OS saves the YMM registers. Tests clear it to run the
// fallbacks through the public API.
var softmaxAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// softmaxZ reports whether, with softmaxAsm, ExpSum, Max and Scale run
// their AVX-512 kernels (softmax512_amd64.s: the AVX2 kernels' results on
// vectors of 16). Either family takes each row in one call, its last
// partial vector under a mask. x/sys/cpu reports AVX-512F only when the
// OS saves the ZMM registers.
var softmaxZ = cpu.X86.HasAVX512F

// expSumKernel runs ExpSum's kernel over the whole row.
func expSumKernel(y, x []float32, scale, shift float32, acc *[8]float64) {
	if len(x) == 0 {
		return
	}
	if softmaxZ {
		expSumAVX512(unsafe.SliceData(y), unsafe.SliceData(x), len(x), scale, shift, &acc[0])
		return
	}
	expSumAVX2(unsafe.SliceData(y), unsafe.SliceData(x), len(x), scale, shift, &acc[0])
}

// maxRow is Max on the whole-row kernels, if they run (x not empty).
func maxRow(x []float32) (float32, bool) {
	switch {
	case !softmaxAsm:
		return 0, false
	case softmaxZ:
		return maxAVX512(&x[0], len(x)), true
	}
	return maxAVX2(&x[0], len(x)), true
}

// scaleRow is Scale on the whole-row kernels, if they run.
func scaleRow(y, x []float32, a float32) bool {
	switch {
	case !softmaxAsm:
		return false
	case len(x) == 0:
	case softmaxZ:
		scaleAVX512(&y[0], &x[0], len(x), a)
	default:
		scaleAVX2(&y[0], &x[0], len(x), a)
	}
	return true
}

// prefixRow is SoftmaxPrefix on its AVX-512 kernel, if it runs.
func prefixRow(y, x []float32, n int, scale float32) bool {
	if !softmaxAsm || !softmaxZ {
		return false
	}
	softmaxPrefixAVX512(&y[0], &x[0], n, len(y), scale)
	return true
}

// maxAsm and scaleAsm are the whole-vector kernels of the other
// architectures: on amd64, maxRow and scaleRow take every row.
func maxAsm(x *float32, n int, m *float32) { panic("vec: maxAsm: maxRow takes the rows on amd64") }

func scaleAsm(y, x *float32, n int, a float32) {
	panic("vec: scaleAsm: scaleRow takes the rows on amd64")
}

// dotAsm is Dot on the AVX2 kernel, the last partial vector padded with
// zeros in a stack copy.
func dotAsm(a, b []float32) float64 {
	n := len(a) &^ 7
	var pa, pb *float32
	if n < len(a) {
		// Zero padding adds +0 to lane sums that are never -0.
		var ab, bb [8]float32
		copy(ab[:], a[n:])
		copy(bb[:], b[n:])
		pa, pb = &ab[0], &bb[0]
	}
	return dotAVX2(unsafe.SliceData(a), unsafe.SliceData(b), n, pa, pb)
}

// softmaxGradKernels: SoftmaxGrad has AVX2 kernels here.
const softmaxGradKernels = true

// dot4Asm is dot4AVX2 (n a multiple of 4, n > 0).
func dot4Asm(y, dy []float32, n int, lanes *[4]float64) { dot4AVX2(&y[0], &dy[0], n, lanes) }

// softmaxGradAsm is softmaxGradAVX2 (n a multiple of 4, n > 0).
func softmaxGradAsm(ds, y, dy []float32, n int, scale, dot float64) {
	softmaxGradAVX2(&ds[0], &y[0], &dy[0], n, scale, dot)
}
