package bf16gemm

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"

	"gptlab/precision"
)

// get returns op(A)(i, p) and op(B)(p, j) as float32, zero past the depth
// (the packing's padding).
func (o operands) get(i, p, j int) (float32, float32) {
	if p >= o.k {
		return 0, 0
	}
	a, b := o.at(i, p, j)
	return float32(a), float32(b)
}

// refDot is C(i, j) under the VDPBF16PS kernel's contract, written
// directly: over the pairs in order, the odd product then the even one.
func refDot(o operands, i, j int) float32 {
	v := float32(0)
	for p := 0; p < o.k; p += 2 {
		a0, b0 := o.get(i, p, j)
		a1, b1 := o.get(i, p+1, j)
		v = fmaFTZ(a1, b1, v)
		v = fmaFTZ(a0, b0, v)
	}
	return v
}

// refAMX is C(i, j) under the AMX kernel's contract (TDPBF16PS as the SDM
// defines it), written directly: per block of 32 depths (16 pairs), an
// even and an odd partial sum from +0, added, then added to C.
func refAMX(o operands, i, j int) float32 {
	v := float32(0)
	for q := 0; q < o.k; q += 32 {
		var even, odd float32
		for p := q; p < q+32; p += 2 {
			a0, b0 := o.get(i, p, j)
			a1, b1 := o.get(i, p+1, j)
			even = fmaFTZ(a0, b0, even)
			odd = fmaFTZ(a1, b1, odd)
		}
		v = addFTZ(v, addFTZ(even, odd))
	}
	return v
}

// shapes are the problems the driver tests run: edges of every kind
// (one row, one column, depth 1, odd depth, partial tiles) and the GPT's
// attention shapes.
var shapes = []struct{ m, n, k int }{
	{1, 1, 1}, {1, 33, 3}, {13, 1, 2}, {12, 32, 2}, {45, 70, 101}, {70, 45, 101}, {64, 64, 32}, {64, 32, 64}, {33, 65, 64},
}

var forms = []struct{ aT, bT bool }{{false, true}, {false, false}, {true, false}, {true, true}}

// normalVal returns random values of mixed magnitude.
func normalVal(rng *rand.Rand) func() float32 {
	return func() float32 { return float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(9)-4)) }
}

// sameBits reports whether got and want are the same float32 (any NaN
// matches any NaN).
func sameBits(got, want float32) bool {
	return math.Float32bits(got) == math.Float32bits(want) || got != got && want != want
}

// TestPackedKernelsExact runs the driver with each packed kernel (the
// emulated ones everywhere, the real VDPBF16PS one where the CPU has it)
// on every form and shape, and checks every element bit for bit against
// the kernel's contract written directly (refDot, refAMX): the packing,
// padding, edge tiles and the emulated instruction sequences together.
func TestPackedKernelsExact(t *testing.T) {
	type kc struct {
		k   *kernel
		ref func(operands, int, int) float32
	}
	ks := []kc{{emuDotKernel(), refDot}, {emuAMXKernel(false), refAMX}}
	if k := dotKernel(); k != nil {
		ks = append(ks, kc{k, refDot})
	}
	if k, _ := amxKernel(); k != nil {
		ks = append(ks, kc{k, refAMX})
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range ks {
		for _, f := range forms {
			for _, s := range shapes {
				o := testOperands(f.aT, f.bT, s.m, s.n, s.k, normalVal(rng))
				run(c.k, o, 1)
				bad := 0
				for i := range s.m {
					for j := range s.n {
						if got, want := o.c[i*o.ldc+j], c.ref(o, i, j); !sameBits(got, want) {
							if bad++; bad <= 3 {
								t.Errorf("%s aT=%v bT=%v %dx%dx%d: C[%d,%d] = %v, want %v", c.k.name, f.aT, f.bT, s.m, s.n, s.k, i, j, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestDotTileAgainstEmulation compares the real VDPBF16PS tile with its
// emulation bit for bit on panels holding every kind of value: normals of
// all magnitudes, zeros of both signs, bf16 subnormals (treated as zero),
// products that overflow, cancel or underflow (flushed), infinities and
// NaNs; from zero and accumulating onto C.
func TestDotTileAgainstEmulation(t *testing.T) {
	k := dotKernel()
	if k == nil {
		t.Skip("no AVX512_BF16 here: the kernel's contract is tested through emuDotTile only")
	}
	rng := rand.New(rand.NewPCG(2, 3))
	special := []uint16{0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F80, 0xBF80, 0x1F80, 0x2000}
	word := func() uint16 {
		switch rng.IntN(4) {
		case 0:
			return special[rng.IntN(len(special))]
		case 1:
			return uint16(rng.Uint32()) // any bits
		}
		return precision.ToBF16(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20)))
	}
	for _, pairs := range []int{0, 1, 2, 7, 64} {
		for trial := range 20 {
			a := make([]uint16, 2*dotMR*max(pairs, 1))
			b := make([]uint16, 2*dotNR*max(pairs, 1))
			for i := range a {
				a[i] = word()
			}
			for i := range b {
				b[i] = word()
			}
			if trial < 10 { // ordinary values only: the NaN-free cases must agree exactly too
				for i := range a {
					a[i] = precision.ToBF16(float32(rng.NormFloat64()))
				}
				for i := range b {
					b[i] = precision.ToBF16(float32(rng.NormFloat64()))
				}
			}
			ldc := dotNR + 3
			got, want := make([]float32, dotMR*ldc), make([]float32, dotMR*ldc)
			acc := trial%2 == 1
			for i := range got {
				got[i] = float32(rng.NormFloat64())
				want[i] = got[i]
			}
			k.tile(pairs, &a[0], &b[0], &got[0], ldc, acc)
			emuDotTile(pairs, &a[0], &b[0], &want[0], ldc, acc)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("pairs %d trial %d acc %v: C[%d] = %v (%#08x), emulation %v (%#08x)",
						pairs, trial, acc, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestSelfTest checks the self-test passes on the emulated kernels (and
// the real VDPBF16PS one) and fails, saying where, on an AMX emulation
// whose B tiles are swapped.
func TestSelfTest(t *testing.T) {
	for _, k := range []*kernel{emuDotKernel(), emuAMXKernel(false), dotKernel()} {
		if k == nil {
			continue
		}
		if why := selfTest(k); why != "" {
			t.Errorf("selfTest(%s) = %q, want a pass", k.name, why)
		}
	}
	if why := selfTest(emuAMXKernel(true)); !strings.Contains(why, "C[") {
		t.Errorf("selfTest(broken AMX emulation) = %q, want a mismatch", why)
	}
}

// TestGemmPaths runs the public Gemm on every path this machine has and
// every form, against the float64 product within the float32 accumulation
// bound; a split across goroutines must give the serial bits.
func TestGemmPaths(t *testing.T) {
	defer restorePath(t)
	rng := rand.New(rand.NewPCG(4, 5))
	for _, name := range Paths() {
		if err := SetPath(name); err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			for _, s := range append(shapes[:len(shapes):len(shapes)], struct{ m, n, k int }{200, 130, 128}) {
				o := testOperands(f.aT, f.bT, s.m, s.n, s.k, normalVal(rng))
				Gemm(trans(f.aT), trans(f.bT), s.m, s.n, s.k, o.a, o.lda, o.b, o.ldb, o.c, o.ldc)
				for i := range s.m {
					for j := range s.n {
						ref, mag := o.ref(i, j)
						if got := float64(o.c[i*o.ldc+j]); !(math.Abs(got-ref) <= 2*float64(s.k)*0x1p-24*mag) {
							t.Fatalf("%s aT=%v bT=%v %dx%dx%d: C[%d,%d] = %v, want %v", name, f.aT, f.bT, s.m, s.n, s.k, i, j, got, ref)
						}
					}
				}
				if p := paths[slices.Index(Paths(), name)]; p.kern != nil && s.m > p.kern.mr {
					serial := append([]float32(nil), o.c...)
					run(p.kern, o, 3)
					for i := range serial {
						if !sameBits(serial[i], o.c[i]) {
							t.Fatalf("%s %v: split run differs at %d", name, s, i)
						}
					}
				}
			}
		}
	}
}

// TestGemmArgs checks zero sizes, a zero depth (C cleared) and the panics
// on bad arguments.
func TestGemmArgs(t *testing.T) {
	c := []float32{1, 2, 3, 4}
	Gemm(blas.NoTrans, blas.Trans, 2, 2, 0, nil, 1, nil, 1, c, 2)
	for _, v := range c {
		if v != 0 {
			t.Fatalf("k = 0: C = %v, want zeros", c)
		}
	}
	Gemm(blas.NoTrans, blas.NoTrans, 0, 5, 5, nil, 5, make([]uint16, 25), 5, nil, 5)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"short a", func() {
			Gemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, make([]uint16, 3), 2, make([]uint16, 4), 2, make([]float32, 4), 2)
		}, "len(a)"},
		{"small ldb", func() {
			Gemm(blas.NoTrans, blas.Trans, 2, 2, 3, make([]uint16, 6), 3, make([]uint16, 6), 2, make([]float32, 4), 2)
		}, "ldb"},
		{"short c", func() {
			Gemm(blas.NoTrans, blas.NoTrans, 2, 2, 2, make([]uint16, 4), 2, make([]uint16, 4), 2, make([]float32, 3), 2)
		}, "len(c)"},
		{"negative m", func() { Gemm(blas.NoTrans, blas.NoTrans, -1, 2, 2, nil, 2, nil, 2, nil, 2) }, "negative"},
	} {
		func() {
			defer func() {
				r, _ := recover().(string)
				if !strings.Contains(r, tc.want) {
					t.Errorf("%s: panic %q, want one naming %q", tc.name, r, tc.want)
				}
			}()
			tc.f()
		}()
	}
	if err := SetPath("tpu"); err == nil || !strings.Contains(err.Error(), "widen") {
		t.Errorf("SetPath(tpu) = %v, want an error listing the paths", err)
	}
}

// TestKernelEncodings decodes the BYTE directives of kernel_amd64.s with
// GNU objdump (binutils knows AVX512_BF16 and AMX; Go's tools do not) and
// checks that each kernel's bytes are the instructions it is meant to run.
func TestKernelEncodings(t *testing.T) {
	bin, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("GNU objdump not installed: encodings checked by precision/asm/x86enc's test only")
	}
	src, err := os.ReadFile("kernel_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"amxStrip32x32": {"ldtilecfg (%rdi)", "tileloadd (%rdi,%r9,1),%tmm0", "tilezero %tmm3",
			"tileloadd (%rsi,%rdx,1),%tmm4", "tileloadd (%r11,%rdx,1),%tmm5", "tileloadd (%rcx,%rax,1),%tmm6",
			"tileloadd (%rbx,%rax,1),%tmm7", "tdpbf16ps %tmm6,%tmm4,%tmm0", "tdpbf16ps %tmm7,%tmm4,%tmm1",
			"tdpbf16ps %tmm6,%tmm5,%tmm2", "tdpbf16ps %tmm7,%tmm5,%tmm3", "tilestored %tmm3,(%rdi,%r9,1)", "tilerelease"},
		"dotTile12x32":  {"vdpbf16ps %zmm24,%zmm26,%zmm0", "vdpbf16ps %zmm25,%zmm26,%zmm1", "vdpbf16ps %zmm25,%zmm27,%zmm23"},
		"dotTile12x32s": {"vdpbf16ps %zmm24,%zmm26,%zmm0", "vdpbf16ps %zmm25,%zmm26,%zmm1", "vdpbf16ps %zmm25,%zmm27,%zmm23"},
	}
	for _, fn := range strings.Split(string(src), "TEXT ·")[1:] {
		name := fn[:strings.Index(fn, "(")]
		var code []byte
		for _, line := range strings.Split(fn, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && f[0] == "BYTE" {
				v, err := strconv.ParseUint(strings.TrimPrefix(f[1], "$"), 0, 8)
				if err != nil {
					t.Fatalf("%s: %q: %v", name, line, err)
				}
				code = append(code, byte(v))
			}
		}
		w, ok := want[name]
		if !ok {
			continue
		}
		delete(want, name)
		file := filepath.Join(t.TempDir(), name+".bin")
		if err := os.WriteFile(file, code, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-D", "-b", "binary", "-m", "i386:x86-64", "--no-show-raw-insn", file).Output()
		if err != nil {
			t.Skipf("objdump: %v", err)
		}
		text := strings.Join(strings.Fields(string(out)), " ")
		if strings.Contains(text, "(bad)") {
			t.Errorf("%s: objdump finds bytes it cannot decode", name)
		}
		for _, ins := range w {
			if !strings.Contains(text, ins) {
				t.Errorf("%s: %q not among its decoded bytes", name, ins)
			}
		}
	}
	for name := range want {
		t.Errorf("%s not in kernel_amd64.s", name)
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// restorePath puts the calibrated choice back after a test that forced a
// path.
func restorePath(t *testing.T) {
	if err := SetPath("auto"); err != nil {
		t.Fatal(err)
	}
}

// TestSplitNoAllocs: a product split across goroutines allocates nothing
// once its pools are warm. Counted by hand: testing.AllocsPerRun runs at
// GOMAXPROCS 1, where nothing splits.
func TestSplitNoAllocs(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2 to split")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no GC emptying the pools mid-count
	k := emuDotKernel()
	o := testOperands(false, true, 96, 64, 32, normalVal(rand.New(rand.NewPCG(9, 9))))
	for range 10 {
		run(k, o, 2)
	}
	const calls = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		run(k, o, 2)
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n > calls/20 {
		t.Errorf("%d split products allocated %d times, want about none", calls, n)
	}
}
