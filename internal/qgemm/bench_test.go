package qgemm

import (
	"fmt"
	"testing"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm"
	"gptlab/internal/testutil"
	"gptlab/precision"
)

// benchShapes are the linear layers of baby (C=128) and of the large
// config (C=512): attn c_attn, attn c_proj, mlp c_fc, mlp c_proj, as
// K→N.
var benchShapes = []struct {
	name string
	k, n int
}{
	{"baby/c_attn", 128, 384}, {"baby/attn_proj", 128, 128}, {"baby/c_fc", 128, 512}, {"baby/mlp_proj", 512, 128},
	{"large/c_attn", 512, 1536}, {"large/attn_proj", 512, 512}, {"large/c_fc", 512, 2048}, {"large/mlp_proj", 2048, 512},
}

// BenchmarkLinear times y = x·Wᵀ at M=1 and M=64 for float32 sgemm, the
// weight-only kernel and the dynamic kernel on each path this machine
// runs, reporting GFLOP/s (2·M·N·K per call; int8 operations for the
// dynamic kernel). Everything runs on one goroutine: sgemm is held to one
// thread, as the int8 kernels run on the caller's.
func BenchmarkLinear(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	defer sgemm.SetThreads(sgemm.SetThreads(1))
	for _, m := range []int{1, 64} {
		for _, sh := range benchShapes {
			p := newProblem(b, shape{m, sh.n, sh.k}, precision.Int8PerChannel, 12)
			wf := make([]float32, sh.n*sh.k)
			precision.DequantizeInt8(wf, p.q, p.scales, sh.n, sh.k, precision.Int8PerChannel)
			y := make([]float32, m*sh.n)
			flops := 2 * float64(m*sh.n*sh.k)
			run := func(name string, f func()) {
				b.Run(fmt.Sprintf("M=%d/%s/%s", m, sh.name, name), func(b *testing.B) {
					b.ReportAllocs()
					f()
					for b.Loop() {
						f()
					}
					b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
			run("f32", func() {
				sgemm.Implementation{}.Sgemm(blas.NoTrans, blas.Trans, m, sh.n, sh.k, 1, p.x, sh.k, wf, sh.k, 0, y, sh.n)
			})
			run("weightonly", func() { WeightOnly(y, p.x, m, p.w) })
			for _, k := range kernels {
				run("dynamic-"+k.name, func() { dynamic(k, y, p.x, m, p.w) })
			}
		}
	}
}

// BenchmarkQuantRow times the activation quantizer of each kernel on a
// row of K = 512 and 2048 (the share of a dynamic call it costs).
func BenchmarkQuantRow(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, k := range []int{512, 2048} {
		p := newProblem(b, shape{1, 16, k}, precision.Int8PerChannel, 15)
		dst := make([]byte, k)
		for _, kn := range kernels {
			b.Run(fmt.Sprintf("K=%d/%s", k, kn.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					kn.quant(dst, p.x, kn.unsigned)
				}
				b.ReportMetric(float64(k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
			})
		}
	}
}
