package bf16gemm

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
)

// Gemm computes C = op(A)·op(B) with float32 accumulation, where A and B
// are row-major matrices of bfloat16 bits, op(X) is X or Xᵀ as tA and tB
// say, op(A) is m×k, op(B) is k×n and C (float32, row-major) is m×n; C is
// overwritten. It runs on the path Path names, splitting large products
// across GOMAXPROCS goroutines (at most maxThreads). It panics on bad
// arguments, naming the one at fault.
func Gemm(tA, tB blas.Transpose, m, n, k int, a []uint16, lda int, b []uint16, ldb int, c []float32, ldc int) {
	o := operands{aT: tA != blas.NoTrans, bT: tB != blas.NoTrans, m: m, n: n, k: k,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	o.check(tA, tB)
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := range m {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	p := current()
	if p.kern == nil {
		widen(o)
		return
	}
	run(p.kern, o, threads(m, n, k))
}

// operands is one checked call.
type operands struct {
	aT, bT  bool
	m, n, k int
	a       []uint16
	lda     int
	b       []uint16
	ldb     int
	c       []float32
	ldc     int
}

// check panics unless the arguments describe valid matrices.
func (o operands) check(tA, tB blas.Transpose) {
	for _, t := range []blas.Transpose{tA, tB} {
		if t != blas.NoTrans && t != blas.Trans && t != blas.ConjTrans {
			panic(fmt.Sprintf("bf16gemm: bad transpose %v", t))
		}
	}
	if o.m < 0 || o.n < 0 || o.k < 0 {
		panic(fmt.Sprintf("bf16gemm: negative dimension m=%d n=%d k=%d", o.m, o.n, o.k))
	}
	ar, ac := o.m, o.k // A's stored shape
	if o.aT {
		ar, ac = o.k, o.m
	}
	br, bc := o.k, o.n
	if o.bT {
		br, bc = o.n, o.k
	}
	for _, x := range []struct {
		name       string
		rows, cols int
		ld, have   int
	}{{"a", ar, ac, o.lda, len(o.a)}, {"b", br, bc, o.ldb, len(o.b)}, {"c", o.m, o.n, o.ldc, len(o.c)}} {
		if x.ld < max(1, x.cols) {
			panic(fmt.Sprintf("bf16gemm: ld%s = %d, want >= %d", x.name, x.ld, max(1, x.cols)))
		}
		if x.rows > 0 && x.cols > 0 && x.have < (x.rows-1)*x.ld+x.cols {
			panic(fmt.Sprintf("bf16gemm: len(%s) = %d, want >= %d", x.name, x.have, (x.rows-1)*x.ld+x.cols))
		}
	}
}

// maxThreads bounds the goroutines of one call.
const maxThreads = 4

// parallelFlops is the size (2·m·n·k) from which a product is split:
// below about 4 MFLOP handing work to another goroutine costs more than it
// saves (internal/sgemm's threshold).
const parallelFlops = 4 << 20

// threads returns how many goroutines an m×n×k product uses.
func threads(m, n, k int) int {
	if 2*int64(m)*int64(n)*int64(k) < parallelFlops {
		return 1
	}
	return min(runtime.GOMAXPROCS(0), maxThreads)
}

// pathImpl is a way of computing Gemm: a packed kernel, or nil for widen.
type pathImpl struct {
	name string
	kern *kernel
}

var (
	pathOnce sync.Once
	paths    []pathImpl // available, in order of preference (set once)
	amxWhy   string     // why AMX is not available ("" if it is; set once)
	pathMu   sync.Mutex
	chosen   pathImpl
)

// initPaths finds the paths this machine runs (running the AMX checks and
// self-test) on first use.
func initPaths() { pathOnce.Do(findPaths) }

func findPaths() {
	if k, why := amxKernel(); k != nil {
		paths = append(paths, pathImpl{"amx", k})
	} else {
		amxWhy = why
	}
	// Widen comes before VDPBF16PS: the float32 GEMM is the faster of the
	// two where measured (README), so VDPBF16PS is a choice, not a default.
	paths = append(paths, pathImpl{"widen", nil})
	if k := dotKernel(); k != nil {
		paths = append(paths, pathImpl{"avx512bf16", k})
	}
	pathMu.Lock()
	chosen = paths[0]
	pathMu.Unlock()
}

// current returns the path Gemm uses now.
func current() pathImpl {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	return chosen
}

// Path names the path Gemm uses: "amx" where AMX-BF16 is available and
// passed its self-test, else "widen"; SetPath changes it.
func Path() string { return current().name }

// Paths lists the paths this machine runs, the default first.
func Paths() []string {
	initPaths()
	return pathNames()
}

func pathNames() []string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p.name
	}
	return names
}

// SetPath makes Gemm use the path called name; it fails if this machine
// cannot run it (for AMX, AMXStatus says why).
func SetPath(name string) error {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	for _, p := range paths {
		if p.name == name {
			chosen = p
			return nil
		}
	}
	return fmt.Errorf("bf16gemm: path %q not available on this machine (have %v)", name, pathNames())
}

// AMXStatus reports whether the AMX path is available and, if not, why
// (no AMX in the CPU, the OS's tile state not enabled or not granted,
// GPTLAB_BF16=off, or the self-test's mismatch).
func AMXStatus() (ok bool, reason string) {
	initPaths()
	return amxWhy == "", amxWhy
}
