package qgemm

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

var schemes = []precision.Int8Scheme{precision.Int8PerChannel, precision.Int8PerTensor, precision.Int8PerBlock32}

// shape is one test product: m rows of x, W [n, k].
type shape struct{ m, n, k int }

var shapes = []shape{
	{1, 384, 128}, {64, 128, 128}, {65, 48, 96}, {1, 17, 33}, {3, 40, 70},
	{5, 1, 1}, {2, 16, 4}, {7, 130, 250}, {4, 64, 512},
}

// problem is random x and quantized W with a zero channel, a zero row of x
// and a row of x and a channel of W at full scale.
type problem struct {
	shape
	scheme precision.Int8Scheme
	x      []float32
	q      []int8
	scales []float32
	w      *Weights
}

func newProblem(t testing.TB, sh shape, sc precision.Int8Scheme, seed uint64) *problem {
	r := rand.New(rand.NewPCG(seed, uint64(sh.m*1000+sh.n*10+sh.k)))
	p := &problem{shape: sh, scheme: sc, x: make([]float32, sh.m*sh.k)}
	for i := range p.x {
		p.x[i] = float32(r.NormFloat64())
	}
	if sh.m > 2 {
		clear(p.x[1*sh.k : 2*sh.k]) // a zero row
	}
	wf := make([]float32, sh.n*sh.k)
	for i := range wf {
		wf[i] = float32(r.NormFloat64() * 0.05)
	}
	if sh.n > 3 {
		clear(wf[2*sh.k : 3*sh.k]) // a zero channel
	}
	var err error
	p.q, p.scales, err = precision.QuantizeInt8("w", wf, sh.n, sh.k, sc)
	if err != nil {
		t.Fatal(err)
	}
	p.w, err = NewWeights(sh.n, sh.k, p.q, p.scales, sc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// intRef is Dynamic's result from the definition in integers: x's rows
// quantized with precision.QuantizeInt8Vector, exact int64 sums of code
// products per block, then the documented float32 epilogue.
func (p *problem) intRef() []float32 {
	y := make([]float32, p.m*p.n)
	bk := p.k
	if p.scheme == precision.Int8PerBlock32 {
		bk = precision.Int8BlockSize
	}
	qx := make([]int8, p.k)
	for i := range p.m {
		sx := precision.QuantizeInt8Vector(qx, p.x[i*p.k:(i+1)*p.k])
		for j := range p.n {
			var f float32
			for b0 := 0; b0 < p.k; b0 += bk {
				var acc int64
				for kk := b0; kk < min(b0+bk, p.k); kk++ {
					acc += int64(qx[kk]) * int64(p.q[j*p.k+kk])
				}
				prod := float32(float32(acc) * p.scales[p.scheme.ScaleIndex(j, b0, p.k)])
				if b0 == 0 {
					f = prod
				} else {
					f += prod
				}
			}
			y[i*p.n+j] = f * sx
		}
	}
	return y
}

// f64Ref is x·Wᵀ in float64 with W dequantized (and, dynamic, x too),
// and the bound of each element's float32 rounding error.
func (p *problem) f64Ref(dynamic bool) (ref, tol []float64) {
	wd := make([]float32, p.n*p.k)
	precision.DequantizeInt8(wd, p.q, p.scales, p.n, p.k, p.scheme)
	xd := append([]float32(nil), p.x...)
	if dynamic {
		qx := make([]int8, p.k)
		for i := range p.m {
			s := precision.QuantizeInt8Vector(qx, p.x[i*p.k:(i+1)*p.k])
			for kk, v := range qx {
				xd[i*p.k+kk] = float32(v) * s
			}
		}
	}
	ref, tol = make([]float64, p.m*p.n), make([]float64, p.m*p.n)
	for i := range p.m {
		for j := range p.n {
			var s, a float64
			for kk := range p.k {
				v := float64(xd[i*p.k+kk]) * float64(wd[j*p.k+kk])
				s += v
				a += math.Abs(v)
			}
			ref[i*p.n+j] = s
			// float32 sums of k terms: (k+2)·2^-24 relative to Σ|terms|.
			tol[i*p.n+j] = float64(p.k+2)*0x1p-24*a + 1e-30
		}
	}
	return ref, tol
}

func TestDynamicMatchesReferences(t *testing.T) {
	for _, k := range kernels {
		for _, sc := range schemes {
			for _, sh := range shapes {
				p := newProblem(t, sh, sc, 1)
				y := make([]float32, sh.m*sh.n)
				dynamic(k, y, p.x, sh.m, p.w)
				want := p.intRef()
				for i := range y {
					if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s %v %v: y[%d,%d] = %g, integer reference %g", k.name, sc, sh, i/sh.n, i%sh.n, y[i], want[i])
					}
				}
				ref, tol := p.f64Ref(true)
				for i := range y {
					if d := math.Abs(float64(y[i]) - ref[i]); d > tol[i] {
						t.Fatalf("%s %v %v: y[%d] = %g, float64 reference %g (|d| %g > %g)", k.name, sc, sh, i, y[i], ref[i], d, tol[i])
					}
				}
			}
		}
	}
}

func TestWeightOnlyMatchesReference(t *testing.T) {
	for _, k := range kernels {
		for _, sc := range schemes {
			for _, sh := range append(shapes, shape{3, 300, 2048}, shape{1, 300, 2048}) {
				p := newProblem(t, sh, sc, 2)
				y := make([]float32, sh.m*sh.n)
				weightOnly(k, y, p.x, sh.m, p.w)
				ref, tol := p.f64Ref(false)
				for i := range y {
					if d := math.Abs(float64(y[i]) - ref[i]); d > tol[i] {
						t.Fatalf("%s %v %v: y[%d] = %g, float64 reference %g (|d| %g > %g)", k.name, sc, sh, i, y[i], ref[i], d, tol[i])
					}
				}
			}
		}
	}
}

// TestDynamicError checks Dynamic's error against the float64 product of
// the unquantized activations: at most half an activation step per term,
// 0.5·sx[i]·Σ_k |Wdq[j,k]|, plus float32 rounding.
func TestDynamicError(t *testing.T) {
	p := newProblem(t, shape{8, 64, 256}, precision.Int8PerChannel, 3)
	y := make([]float32, p.m*p.n)
	Dynamic(y, p.x, p.m, p.w)
	ref, tol := p.f64Ref(false)
	wd := make([]float32, p.n*p.k)
	precision.DequantizeInt8(wd, p.q, p.scales, p.n, p.k, p.scheme)
	qx := make([]int8, p.k)
	for i := range p.m {
		sx := float64(precision.QuantizeInt8Vector(qx, p.x[i*p.k:(i+1)*p.k]))
		for j := range p.n {
			var aw float64
			for kk := range p.k {
				aw += math.Abs(float64(wd[j*p.k+kk]))
			}
			bound := 0.5*sx*aw*(1+1e-5) + 2*tol[i*p.n+j]
			if d := math.Abs(float64(y[i*p.n+j]) - ref[i*p.n+j]); d > bound {
				t.Fatalf("y[%d,%d] off by %g > %g", i, j, d, bound)
			}
		}
	}
}

func TestDynamicNonFiniteRow(t *testing.T) {
	p := newProblem(t, shape{3, 32, 64}, precision.Int8PerChannel, 4)
	p.x[2*64+5] = float32(math.Inf(1))
	for _, k := range kernels {
		y := make([]float32, 3*32)
		dynamic(k, y, p.x, 3, p.w)
		for j := range 32 {
			if !math.IsNaN(float64(y[2*32+j])) || math.IsNaN(float64(y[j])) {
				t.Fatalf("%s: row 2 col %d = %g, row 0 = %g", k.name, j, y[2*32+j], y[j])
			}
		}
	}
}

func TestNewWeightsRefuses(t *testing.T) {
	q := make([]int8, 8)
	if _, err := NewWeights(2, 4, q, []float32{1}, precision.Int8PerChannel); err == nil {
		t.Error("missing scale accepted")
	}
	if _, err := NewWeights(2, 4, q[:7], []float32{1, 1}, precision.Int8PerChannel); err == nil {
		t.Error("short codes accepted")
	}
	if _, err := NewWeights(1, MaxK+1, make([]int8, MaxK+1), []float32{1}, precision.Int8PerChannel); err == nil {
		t.Error("K beyond MaxK accepted")
	}
}

// TestBytes: the packed weights are int8 plus per-column scales and
// corrections; no float32 copy.
func TestBytes(t *testing.T) {
	p := newProblem(t, shape{1, 384, 128}, precision.Int8PerChannel, 5)
	if got, want := p.w.Bytes(), 384*128+384*8; got != want {
		t.Errorf("Bytes() = %d, want %d", got, want)
	}
	p = newProblem(t, shape{1, 384, 128}, precision.Int8PerBlock32, 5)
	if got, want := p.w.Bytes(), 384*128+384*4*8; got != want {
		t.Errorf("block32 Bytes() = %d, want %d", got, want)
	}
}

func TestSetPath(t *testing.T) {
	defer SetPath(Path())
	if err := SetPath("go"); err != nil || Path() != "go" {
		t.Fatal(err)
	}
	if err := SetPath("sse9"); err == nil || !strings.Contains(err.Error(), "want one of go, avx2, avxvnni, avx512vnni") {
		t.Errorf("unknown kernel: %v", err)
	}
	if err := pathFromEnv("sse9"); err == nil || !strings.Contains(err.Error(), "GPTLAB_QGEMM=sse9") {
		t.Errorf("bad environment: %v", err)
	}
	// A kernel this machine lacks (under purego, every assembly one).
	for _, name := range []string{"avx2", "avxvnni", "avx512vnni"} {
		if !slices.Contains(Paths(), name) {
			if err := SetPath(name); err == nil || !strings.Contains(err.Error(), "not available on this CPU") {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if !strings.Contains(Kernels(), "dynamic="+Path()) {
		t.Errorf("Kernels() = %q", Kernels())
	}
}

func TestAllocs(t *testing.T) {
	p := newProblem(t, shape{4, 130, 96}, precision.Int8PerChannel, 6)
	y := make([]float32, 4*130)
	Dynamic(y, p.x, 4, p.w)
	WeightOnly(y, p.x, 4, p.w)
	if n := testing.AllocsPerRun(20, func() { Dynamic(y, p.x, 4, p.w) }); n != 0 {
		t.Errorf("Dynamic allocates %v per call", n)
	}
	if n := testing.AllocsPerRun(20, func() { WeightOnly(y, p.x, 4, p.w) }); n != 0 {
		t.Errorf("WeightOnly allocates %v per call", n)
	}
}

// TestPacking reads every code, scale and correction back from the
// packed layout documented on Weights, and checks the padding is zero.
func TestPacking(t *testing.T) {
	for _, sc := range schemes {
		p := newProblem(t, shape{1, 37, 70}, sc, 14)
		w := p.w
		seen := 0
		for j := range w.np * panelW {
			pn, c := j/panelW, j%panelW
			for kk := range w.kp {
				got := w.codes[((pn*w.kp/kGroup+kk/kGroup)*panelW+c)*kGroup+kk%kGroup]
				want := int8(0)
				if j < p.n && kk < p.k {
					want = p.q[j*p.k+kk]
				}
				if got != want {
					t.Fatalf("%v: code (%d, %d) = %d, want %d", sc, j, kk, got, want)
				}
			}
			for b := range w.nb {
				i := (b*w.np+pn)*panelW + c
				var want float32
				var sum int32
				if j < p.n {
					want = p.scales[sc.ScaleIndex(j, b*w.bk, p.k)]
					for kk := b * w.bk; kk < min((b+1)*w.bk, p.k); kk++ {
						sum += int32(p.q[j*p.k+kk])
					}
				}
				if w.scales[i] != want || w.corr[i] != -128*sum {
					t.Fatalf("%v: column %d block %d: scale %g corr %d, want %g %d", sc, j, b, w.scales[i], w.corr[i], want, -128*sum)
				}
				seen++
			}
		}
		if seen != len(w.scales) {
			t.Errorf("%v: %d scales checked of %d", sc, seen, len(w.scales))
		}
	}
}

// TestParallel: split across goroutines (threshold 0), Dynamic and the
// GEMV give bitwise the serial results, and allocate nothing once warm.
func TestParallel(t *testing.T) {
	if sgemm.Threads() < 2 {
		t.Skip("one thread")
	}
	old := minParOps.Swap(0)
	defer minParOps.Store(old)
	for _, k := range kernels {
		for _, sh := range []shape{{1, 300, 256}, {9, 130, 96}, {64, 512, 128}} {
			p := newProblem(t, sh, precision.Int8PerChannel, 16)
			got, want := make([]float32, sh.m*sh.n), make([]float32, sh.m*sh.n)
			for _, op := range []func(*kernel, []float32, []float32, int, *Weights){dynamic, weightOnly} {
				op(k, got, p.x, sh.m, p.w)
				minParOps.Store(math.MaxInt64)
				op(k, want, p.x, sh.m, p.w)
				minParOps.Store(0)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("%s %v: parallel y[%d] = %g, serial %g", k.name, sh, i, got[i], want[i])
				}
			}
		}
	}
	p := newProblem(t, shape{1, 300, 256}, precision.Int8PerChannel, 17)
	y := make([]float32, 300)
	Dynamic(y, p.x, 1, p.w)
	WeightOnly(y, p.x, 1, p.w)
	if n := testing.AllocsPerRun(50, func() { Dynamic(y, p.x, 1, p.w); WeightOnly(y, p.x, 1, p.w) }); n != 0 {
		t.Errorf("parallel calls allocate %v", n)
	}
}
