package sgemm

import (
	"fmt"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"gptlab/internal/testutil"
)

// benchImpl is one Sgemm under benchmark; setThreads (if not nil) is told
// GOMAXPROCS before the timed loop; readB is how this package's Sgemm
// takes a row-major B (by the kernel's rule, always in place, or packed).
type benchImpl struct {
	name       string
	impl       blas.Float32
	setThreads func(n int)
	readB      readBMode
}

// benchImpls lists the implementations BenchmarkSgemm compares; the
// openblas build tag adds OpenBLAS.
var benchImpls = []benchImpl{
	{name: "gonum", impl: gonum.Implementation{}},
	{name: "ours", impl: Implementation{}},
}

// kernelImpl runs this package's Sgemm with a forced kernel.
type kernelImpl struct {
	Implementation
	kern *kernel
}

func (k kernelImpl) Sgemm(tA, tB blas.Transpose, m, n, kk int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(k.kern, tA != blas.NoTrans, tB != blas.NoTrans, m, n, kk, alpha, a, lda, b, ldb, beta, c, ldc)
}

// gptShape is a product the baby GPT (B=12, T=64, C=128, H=4, hs=32)
// runs in a training step: gptcheck's TestGPTShapesAndTime lists them (the
// attention products run 384 times a step, the others 4-16 times; the head
// is shown with Shakespeare's vocabulary of 65).
type gptShape struct {
	what   string
	m, n   int
	k      int
	aT, bT bool
}

var gptShapes = []gptShape{
	{"qkvproj", 768, 128, 128, false, true},
	{"fc", 768, 512, 128, false, true},
	{"mlpproj", 768, 128, 512, false, true},
	{"head", 768, 65, 128, false, true},
	{"dx_qkvproj", 768, 128, 128, false, false},
	{"dx_fc", 768, 128, 512, false, false},
	{"dx_mlpproj", 768, 512, 128, false, false},
	{"dw_qkvproj", 128, 128, 768, true, false},
	{"dw_fc", 512, 128, 768, true, false},
	{"dw_mlpproj", 128, 512, 768, true, false},
	{"dw_head", 65, 128, 768, true, false},
	{"qk", 64, 64, 32, false, true},
	{"av", 64, 32, 64, false, false},
	{"dv", 64, 32, 64, true, false},
}

// BenchmarkSgemm times each implementation on the GPT's shapes and reports
// GFLOP/s. Threads follow GOMAXPROCS: run with -cpu 1,2.
func BenchmarkSgemm(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	impls := benchImpls
	if kernels[0] != goKernel {
		impls = append(impls[:len(impls):len(impls)], benchImpl{name: "ours-go", impl: kernelImpl{kern: goKernel}})
	}
	if kernels[0].packedS != nil {
		impls = append(impls[:len(impls):len(impls)],
			benchImpl{name: "ours-packB", impl: Implementation{}, readB: readBNever},
			benchImpl{name: "ours-inB", impl: Implementation{}, readB: readBAlways})
	}
	for _, s := range gptShapes {
		o := newOperands(1, shape{s.m, s.n, s.k}, s.aT, s.bT, 1, 0, 0)
		name := fmt.Sprintf("%s_%dx%dx%d_%s%s", s.what, s.m, s.n, s.k, transName(s.aT), transName(s.bT))
		for _, im := range impls {
			b.Run(name+"/"+im.name, func(b *testing.B) {
				if im.setThreads != nil {
					im.setThreads(runtime.GOMAXPROCS(0))
				}
				readB = im.readB
				defer func() { readB = readBByRule }()
				tA, tB := blasTrans(s.aT), blasTrans(s.bT)
				b.ReportAllocs()
				for b.Loop() {
					im.impl.Sgemm(tA, tB, o.m, o.n, o.k, 1, o.a, o.lda, o.b, o.ldb, 0, o.c, o.ldc)
				}
				flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
