package bf16gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gptlab/internal/sgemm"
	"gptlab/internal/testutil"
	"gptlab/precision"
)

// gptShapes are the products of the baby GPT's training step (B*T = 768
// rows, C = 128, 3C = 384, 4C = 512; attention per head: T = 64, hs = 32),
// forward (A·Bᵀ against [out, in] weights), the input gradients (A·B) and
// the weight gradients (Aᵀ·B).
var gptShapes = []struct {
	what    string
	m, n, k int
	aT, bT  bool
}{
	{"qkv", 768, 384, 128, false, true},
	{"attnproj", 768, 128, 128, false, true},
	{"fc", 768, 512, 128, false, true},
	{"mlpproj", 768, 128, 512, false, true},
	{"dx_qkv", 768, 128, 384, false, false},
	{"dx_fc", 768, 128, 512, false, false},
	{"dx_mlpproj", 768, 512, 128, false, false},
	{"dw_qkv", 384, 128, 768, true, false},
	{"dw_fc", 512, 128, 768, true, false},
	{"dw_mlpproj", 128, 512, 768, true, false},
	{"att_qk", 64, 64, 32, false, true},
	{"att_av", 64, 32, 64, false, false},
	{"att_dv", 64, 32, 64, true, false},
}

// BenchmarkGemm reports GFLOP/s of every path this machine has on the
// GPT's shapes, beside internal/sgemm's float32 Sgemm on the same values
// in float32 ("f32"). Threads follow GOMAXPROCS: run with -cpu 1,2.
func BenchmarkGemm(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	defer func() { _ = SetPath("auto") }()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range gptShapes {
		o := testOperands(s.aT, s.bT, s.m, s.n, s.k, normalVal(rng))
		af, bf := make([]float32, len(o.a)), make([]float32, len(o.b))
		precision.DecodeBF16(af, o.a)
		precision.DecodeBF16(bf, o.b)
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		name := fmt.Sprintf("%s_%dx%dx%d", s.what, s.m, s.n, s.k)
		tA, tB := trans(s.aT), trans(s.bT)
		report := func(b *testing.B) {
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		}
		b.Run(name+"/f32", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sgemm.Implementation{}.Sgemm(tA, tB, s.m, s.n, s.k, 1, af, o.lda, bf, o.ldb, 0, o.c, o.ldc)
			}
			report(b)
		})
		for _, p := range Paths() {
			b.Run(name+"/"+p, func(b *testing.B) {
				if err := SetPath(p); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					Gemm(tA, tB, s.m, s.n, s.k, o.a, o.lda, o.b, o.ldb, o.c, o.ldc)
				}
				report(b)
			})
		}
	}
}

// BenchmarkDotTile times the bare VDPBF16PS tile (no packing) over 64
// pairs (the panels in L1) and 384 (B's panel past L1): its GFLOP/s is
// the ceiling of the avx512bf16 path.
func BenchmarkDotTile(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	k := dotKernel()
	if k == nil {
		b.Skip("no AVX512_BF16")
	}
	for _, pairs := range []int{64, 384} {
		b.Run(fmt.Sprintf("pairs=%d", pairs), func(b *testing.B) {
			a := make([]uint16, 2*dotMR*pairs)
			bb := make([]uint16, 2*dotNR*pairs)
			for i := range a {
				a[i] = precision.ToBF16(float32(i%7) - 3)
			}
			for i := range bb {
				bb[i] = precision.ToBF16(float32(i%5) - 2)
			}
			c := make([]float32, dotMR*dotNR)
			b.ReportAllocs()
			for b.Loop() {
				k.tile(pairs, &a[0], &bb[0], &c[0], dotNR, false)
			}
			b.ReportMetric(2*float64(dotMR*dotNR*2*pairs)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGemmF32 reports GFLOP/s of GemmF32 (float32 operands holding
// bf16 values, the bf16 policy's linear layers) on every path on the
// GPT's linear-layer shapes: widen is internal/sgemm on them as they are,
// the packed paths include the conversion. Run with -cpu 1,2.
func BenchmarkGemmF32(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	defer func() { _ = SetPath("auto") }()
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range gptShapes[:10] {
		o := testOperands(s.aT, s.bT, s.m, s.n, s.k, normalVal(rng))
		af, bf := make([]float32, len(o.a)), make([]float32, len(o.b))
		precision.DecodeBF16(af, o.a)
		precision.DecodeBF16(bf, o.b)
		flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
		for _, p := range Paths() {
			b.Run(fmt.Sprintf("%s_%dx%dx%d/%s", s.what, s.m, s.n, s.k, p), func(b *testing.B) {
				if err := SetPath(p); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					GemmF32(trans(s.aT), trans(s.bT), s.m, s.n, s.k, af, o.lda, bf, o.ldb, o.c, o.ldc)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
