package sgemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"

	"gptlab/internal/sgemm/internal/blasarg"
	"gptlab/internal/testutil"
)

// Tolerance: float32 recursive summation of k products has a worst-case
// error of about k·ε times Σ|alpha·a·b| (plus ε|beta·c| for the update), and
// this package sums in a different order than the float64 reference. Each
// element must be within tolFactor·(k+2)·ε of that absolute sum; a wrong
// element, a wrong transpose or a missed edge is off by O(1) relative.
const tolFactor = 2

// shape is one test product: op(A) is m×k, op(B) is k×n.
type shape struct{ m, n, k int }

// testShapes covers tile edges, block edges (kc, mc, nc), primes, k = 0 and
// the GPT's shapes.
func testShapes() []shape {
	s := []shape{
		{1, 1, 1}, {1, 1, 0}, {0, 3, 2}, {7, 13, 29}, {6, 16, 1}, {12, 32, 4}, {5, 15, 3},
		{13, 33, 257}, {145, 17, 9}, {289, 35, 11}, {3, 2100, 5}, {64, 64, 32}, {64, 32, 64},
		{65, 128, 31}, {31, 65, 128}, {9, 24, 19}, {20, 40, 300}, {14, 48, 8}, {100, 70, 600},
	}
	if !testing.Short() {
		s = append(s, shape{768, 384, 128}, shape{768, 65, 128}, shape{128, 384, 100}, shape{65, 128, 768})
	}
	return s
}

// operands holds one test case's inputs.
type operands struct {
	aT, bT        bool
	m, n, k       int
	alpha, beta   float32
	a, b, c       []float32
	lda, ldb, ldc int
}

// newOperands fills A, B and C with values in [-1, 1) from seed; pad is
// added to every leading dimension, and padding cells of C hold a sentinel.
func newOperands(seed uint64, s shape, aT, bT bool, alpha, beta float32, pad int) *operands {
	r := rand.New(rand.NewPCG(seed, 1))
	o := &operands{aT: aT, bT: bT, m: s.m, n: s.n, k: s.k, alpha: alpha, beta: beta}
	ar, ac := s.m, s.k
	if aT {
		ar, ac = s.k, s.m
	}
	br, bc := s.k, s.n
	if bT {
		br, bc = s.n, s.k
	}
	o.lda, o.ldb, o.ldc = max(ac, 1)+pad, max(bc, 1)+pad, max(s.n, 1)+pad
	fill := func(rows, ld int) []float32 {
		x := make([]float32, rows*ld)
		for i := range x {
			x[i] = 2*r.Float32() - 1
		}
		return x
	}
	o.a, o.b, o.c = fill(ar, o.lda), fill(br, o.ldb), fill(s.m, o.ldc)
	for i := 0; i < s.m; i++ {
		for j := s.n; j < o.ldc; j++ {
			o.c[i*o.ldc+j] = sentinel
		}
	}
	return o
}

const sentinel = 12345

func (o *operands) at(x []float32, ld int, t bool, i, j int) float64 {
	if t {
		return float64(x[j*ld+i])
	}
	return float64(x[i*ld+j])
}

// naive returns the exact-ish result (float64 triple loop) and, per element,
// the absolute sum that scales the tolerance.
func (o *operands) naive() (want, mag []float64) {
	want = make([]float64, o.m*o.n)
	mag = make([]float64, o.m*o.n)
	for i := 0; i < o.m; i++ {
		for j := 0; j < o.n; j++ {
			var s, abs float64
			for p := 0; p < o.k; p++ {
				v := o.at(o.a, o.lda, o.aT, i, p) * o.at(o.b, o.ldb, o.bT, p, j)
				s += v
				abs += math.Abs(v)
			}
			alpha, beta := float64(o.alpha), float64(o.beta)
			s *= alpha
			abs *= math.Abs(alpha)
			if o.beta != 0 {
				c := float64(o.c[i*o.ldc+j])
				s += beta * c
				abs += math.Abs(beta * c)
			}
			want[i*o.n+j], mag[i*o.n+j] = s, abs
		}
	}
	return want, mag
}

// check compares C (after the call) with want, and checks C's padding.
func (o *operands) check(c []float32, want, mag []float64) error {
	eps := float64(math.Nextafter32(1, 2) - 1)
	tol := tolFactor * float64(o.k+2) * eps
	for i := 0; i < o.m; i++ {
		for j := 0; j < o.ldc; j++ {
			got := c[i*o.ldc+j]
			if j >= o.n {
				if got != sentinel {
					return fmt.Errorf("C[%d,%d] (padding) = %v, want untouched %v", i, j, got, sentinel)
				}
				continue
			}
			w, m := want[i*o.n+j], mag[i*o.n+j]
			if d := math.Abs(float64(got) - w); !(d <= tol*m+1e-30) {
				return fmt.Errorf("C[%d,%d] = %v, want %v (|diff| %.3g > tol %.3g)", i, j, got, w, d, tol*m)
			}
		}
	}
	return nil
}

func transName(t bool) string {
	if t {
		return "T"
	}
	return "N"
}

func blasTrans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// TestKernels runs every kernel this machine supports, serial and split
// across goroutines, against the naive triple loop on all shapes, all four
// transpose forms, alpha/beta variants and padded leading dimensions; and
// with a row-major B read in place (the strideFunc kernels) bitwise as
// with B packed: by the kernel's rule on one thread and on two (where a
// packed B is shared by the row chunks), always in place on two, always
// packed on one.
func TestKernels(t *testing.T) {
	if kernelByName("avx512") == nil {
		t.Log("avx512 kernel not tested: this CPU/OS lacks AVX-512F")
	}
	defer SetParallelFlops(SetParallelFlops(0))
	defer SetThreads(SetThreads(0))
	testKernels := append(kernels[:len(kernels):len(kernels)], emuKernel512())
	defer func() { readB = readBByRule }()
	type ab struct{ alpha, beta float32 }
	scalars := []ab{{1, 0}, {1, 1}, {-1.5, 0.25}, {0, 0.5}, {0.5, 0}}
	for si, s := range testShapes() {
		t.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(t *testing.T) {
			for form := 0; form < 4; form++ {
				aT, bT := form&1 == 1, form&2 == 2
				for ci, sc := range scalars {
					if s.m*s.n*s.k > 1e6 && ci > 0 {
						continue // big shapes: alpha 1, beta 0 only
					}
					pad := ci % 2 * 3
					o := newOperands(uint64(100*si+10*form+ci), s, aT, bT, sc.alpha, sc.beta, pad)
					want, mag := o.naive()
					c0 := o.c
					for _, kn := range testKernels {
						if kn.name == "emu512" && s.m*s.n*s.k > 1e6 {
							continue // reference kernels are slow
						}
						var serial []float32
						for run, threads := range []int{1, 2, 2, 1} {
							readB = []readBMode{readBByRule, readBByRule, readBAlways, readBNever}[run]
							SetThreads(threads)
							o.c = append([]float32(nil), c0...)
							if sc.beta == 0 && len(o.c) > 0 {
								o.c[0] = float32(math.NaN()) // must not propagate
							}
							sgemm(kn, aT, bT, o.m, o.n, o.k, o.alpha, o.a, o.lda, o.b, o.ldb, o.beta, o.c, o.ldc)
							if err := o.check(o.c, want, mag); err != nil {
								t.Fatalf("%s kernel, %d threads: Sgemm(%s%s, alpha=%v beta=%v, pad=%d): %v",
									kn.name, threads, transName(aT), transName(bT), sc.alpha, sc.beta, pad, err)
							}
							// The split changes who computes a tile, never its sum.
							if serial == nil {
								serial = o.c
							} else if i := firstDiff(o.c, serial); i >= 0 {
								t.Fatalf("%s kernel, Sgemm(%s%s): C[%d] = %v on %d threads (B read in place: by the kernel's rule 0, always 1, never 2: %d), %v on one",
									kn.name, transName(aT), transName(bT), i, o.c[i], threads, readB, serial[i])
							}
						}
					}
				}
			}
		})
	}
}

// firstDiff is the first index where a and b differ bitwise (NaNs of one
// payload alike), or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestCheckCatchesError is the negative control of TestKernels' comparison:
// one element off by a small fraction of its magnitude must be reported.
func TestCheckCatchesError(t *testing.T) {
	o := newOperands(7, shape{9, 17, 40}, false, true, 1, 0, 2)
	want, mag := o.naive()
	Implementation{}.Sgemm(blas.NoTrans, blas.Trans, o.m, o.n, o.k, o.alpha, o.a, o.lda, o.b, o.ldb, o.beta, o.c, o.ldc)
	if err := o.check(o.c, want, mag); err != nil {
		t.Fatalf("correct result rejected: %v", err)
	}
	o.c[5*o.ldc+3] += float32(1e-3 * mag[5*o.n+3])
	if err := o.check(o.c, want, mag); err == nil {
		t.Fatalf("check accepted C[5,3] off by 1e-3 of its magnitude")
	}
	o.c[5*o.ldc+3] = float32(want[5*o.n+3])
	o.c[2*o.ldc+o.n] = 0 // padding overwritten
	if err := o.check(o.c, want, mag); err == nil {
		t.Fatalf("check accepted a write into C's padding")
	}
}

// TestPanicsLikeGonum checks that bad arguments panic with gonum's messages.
func TestPanicsLikeGonum(t *testing.T) {
	x := make([]float32, 12)
	tests := []struct {
		name          string
		tA, tB        blas.Transpose
		m, n, k       int
		lda, ldb, ldc int
		la, lb, lc    int
		want          string
	}{
		{"transpose", 'x', blas.NoTrans, 2, 2, 2, 2, 2, 2, 4, 4, 4, blasarg.BadTranspose},
		{"m<0", blas.NoTrans, blas.NoTrans, -1, 2, 2, 2, 2, 2, 4, 4, 4, blasarg.MLT0},
		{"k<0", blas.NoTrans, blas.NoTrans, 2, 2, -1, 2, 2, 2, 4, 4, 4, blasarg.KLT0},
		{"lda", blas.NoTrans, blas.NoTrans, 2, 2, 3, 2, 2, 2, 12, 12, 12, blasarg.BadLdA},
		{"ldaT", blas.Trans, blas.NoTrans, 3, 2, 2, 2, 2, 2, 12, 12, 12, blasarg.BadLdA},
		{"ldb", blas.NoTrans, blas.Trans, 2, 2, 3, 3, 2, 2, 12, 12, 12, blasarg.BadLdB},
		{"ldc", blas.NoTrans, blas.NoTrans, 2, 3, 2, 2, 3, 2, 12, 12, 12, blasarg.BadLdC},
		{"blasarg.ShortA", blas.NoTrans, blas.NoTrans, 2, 2, 2, 2, 2, 2, 3, 4, 4, blasarg.ShortA},
		{"blasarg.ShortB", blas.NoTrans, blas.NoTrans, 2, 2, 2, 2, 2, 2, 4, 3, 4, blasarg.ShortB},
		{"blasarg.ShortC", blas.NoTrans, blas.NoTrans, 2, 2, 2, 2, 2, 2, 4, 4, 3, blasarg.ShortC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := func() (msg any) {
				defer func() { msg = recover() }()
				Implementation{}.Sgemm(tt.tA, tt.tB, tt.m, tt.n, tt.k, 1, x[:tt.la], tt.lda, x[:tt.lb], tt.ldb, 0, x[:tt.lc], tt.ldc)
				return nil
			}()
			if got != tt.want {
				t.Errorf("Sgemm panic = %v, want %q", got, tt.want)
			}
			gonumGot := func() (msg any) {
				defer func() { msg = recover() }()
				Implementation{}.Implementation.Sgemm(tt.tA, tt.tB, tt.m, tt.n, tt.k, 1, x[:tt.la], tt.lda, x[:tt.lb], tt.ldb, 0, x[:tt.lc], tt.ldc)
				return nil
			}()
			if got != gonumGot {
				t.Errorf("Sgemm panic = %v, gonum's = %v", got, gonumGot)
			}
		})
	}
}

// TestNoAllocs checks that a warm Sgemm call allocates nothing, serial and
// split across goroutines. The split is counted by hand over many calls
// (testing.AllocsPerRun runs at GOMAXPROCS 1, where no call splits), and
// the runtime's own wait records, which the pool's goroutines take now and
// then, are let pass: an allocation a call would show in every call, so
// fewer than one every other call passes. (Under qemu-user the runtime's
// came to 6 in 24 calls: a quarter of the calls, as often as the bound of a
// quarter this test had, which then failed with no allocation of its own.)
func TestNoAllocs(t *testing.T) {
	o := newOperands(3, shape{768, 384, 128}, false, true, 1, 0, 0)
	runs, calls := 20, 200
	if testutil.Trimmed() { // emulated -short: the 222 products took 240 s
		runs, calls = 4, 24
	}
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			defer SetThreads(SetThreads(threads))
			call := func() {
				Implementation{}.Sgemm(blas.NoTrans, blas.Trans, o.m, o.n, o.k, 1, o.a, o.lda, o.b, o.ldb, 0, o.c, o.ldc)
			}
			call()
			runtime.GC() // buffers must survive collections
			if got := testing.AllocsPerRun(runs, func() { call(); runtime.GC() }); got != 0 {
				t.Errorf("allocs per Sgemm call = %v, want 0", got)
			}
			if runtime.GOMAXPROCS(0) < threads {
				return
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range calls {
				call()
			}
			runtime.ReadMemStats(&after)
			if got := after.Mallocs - before.Mallocs; got >= uint64(calls/2) {
				t.Errorf("%d allocations in %d Sgemm calls on %d threads, want about none", got, calls, threads)
			}
		})
	}
}

// TestKernelName checks Kernel against what the CPU offers, and SetKernel.
func TestKernelName(t *testing.T) {
	got := Kernel()
	if got != kernels[0].name {
		t.Errorf("Kernel() = %q, want best available %q", got, kernels[0].name)
	}
	t.Logf("selected kernel: %s (available: %v)", got, kernelNames())
	defer SetKernel(got)
	if err := SetKernel("go"); err != nil || Kernel() != "go" {
		t.Errorf("SetKernel(go) = %v, Kernel() = %q, want nil, go", err, Kernel())
	}
	if err := SetKernel("sse1"); err == nil {
		t.Errorf("SetKernel(sse1) = nil, want an error")
	}
	if Kernel() != "go" {
		t.Errorf("after a failed SetKernel, Kernel() = %q, want go", Kernel())
	}
}

// TestConcurrentCalls runs Sgemm from several goroutines at once (scratch,
// jobs and workers are shared) and checks every result.
func TestConcurrentCalls(t *testing.T) {
	defer SetThreads(SetThreads(2))
	defer SetParallelFlops(SetParallelFlops(0))
	const g = 6
	errs := make(chan error, g)
	for i := range g {
		go func() {
			s := shape{30 + 7*i, 40 + 5*i, 50}
			o := newOperands(uint64(i), s, i%2 == 0, i%3 == 0, 1, 0.5, i%2)
			want, mag := o.naive()
			for range 20 {
				c := append([]float32(nil), o.c...)
				Implementation{}.Sgemm(blasTrans(o.aT), blasTrans(o.bT), o.m, o.n, o.k, o.alpha, o.a, o.lda, o.b, o.ldb, o.beta, c, o.ldc)
				if err := o.check(c, want, mag); err != nil {
					errs <- fmt.Errorf("goroutine %d, %v: %w", i, s, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range g {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestReadsBRule: a row-major B is read in place below the kernel's
// packBRows and packed from it; a kernel with no packBRows reads it in
// place at any size; Bᵀ, a PackB and a shared packing are never read in
// place; the tests' modes override the rule.
func TestReadsBRule(t *testing.T) {
	var inPlace strideFunc = func(int, *float32, int, *float32, int, *float32, int, float32, bool) {}
	ruled := &kernel{name: "ruled", packedS: inPlace, packBRows: 96}
	plain := &kernel{name: "plain", packedS: inPlace}
	noS := &kernel{name: "noS"}
	tests := []struct {
		kern *kernel
		m    int
		bT   bool
		pack bool
		mode readBMode
		want bool
	}{
		{ruled, 95, false, false, readBByRule, true},
		{ruled, 96, false, false, readBByRule, false},
		{ruled, 768, false, false, readBAlways, true},
		{ruled, 8, false, false, readBNever, false},
		{plain, 768, false, false, readBByRule, true},
		{ruled, 8, true, false, readBAlways, false},
		{ruled, 8, false, true, readBAlways, false},
		{noS, 8, false, false, readBAlways, false},
	}
	defer func() { readB = readBByRule }()
	for _, tc := range tests {
		readB = tc.mode
		p := problem{kern: tc.kern, m: tc.m, bT: tc.bT}
		if tc.pack {
			p.pack = func([]float32, int, int, int, int, int, int) {}
		}
		if got := p.readsB(); got != tc.want {
			t.Errorf("%s kernel, m %d, Bᵀ %v, PackB %v, mode %d: readsB %v, want %v",
				tc.kern.name, tc.m, tc.bT, tc.pack, tc.mode, got, tc.want)
		}
	}
}
